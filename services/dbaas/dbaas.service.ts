/**
 * On-demand PostgreSQL databases per account (spec 4.11–4.14), hosted on the tenant server
 * (DBAAS_ADMIN_URL). The steps live in provisioner.ts, the server side in tenant-server.ts and
 * tenant-sql.ts, the quota in quota.ts, crash clean-up in reconciler.ts; this file maps requests
 * onto them.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { config } from "../../lib/config";
import { notFound } from "../../lib/errors";
import { CallerMeta, respondCreated } from "../../lib/identity";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { DatabaseRow, DatabasesRepository, DatabaseStats, roundMb } from "./databases.repository";
import { toClientError, unavailable } from "./faults";
import { migrations } from "./migrations";
import { isUuid } from "./naming";
import { DestroyNotStarted, Provisioner } from "./provisioner";
import { MIB, QuotaEnforcer, QuotaReport } from "./quota";
import { Reconciler, ReconcileReport } from "./reconciler";
import { Periodic } from "./periodic";
import { TenantServer } from "./tenant-server";

export type DatabaseDetail = {
  id: string;
  databaseName: string;
  host: string;
  port: number;
  username: string;
  storageMb: number;
  maxStorageMb: number;
  createdAt: string;
  readOnly: boolean;
};

export type DatabaseCreated = {
  id: string;
  databaseName: string;
  host: string;
  port: number;
  username: string;
  password: string;
  connectionString: string;
};

/** Records stuck in provisioning or destroying this long belong to a crashed process. */
const RECONCILE_GRACE_S = 300;

type DbaasThis = Service &
  DbThis & {
    repo: DatabasesRepository;
    tenant: TenantServer;
    provisioner: Provisioner;
    quota: QuotaEnforcer;
    reconciler: Reconciler;
    quotaLoop: Periodic<QuotaReport>;
    reconcileLoop: Periodic<ReconcileReport>;
    detail(row: DatabaseRow): DatabaseDetail;
    findOwn(ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseRow>;
  };

const idParam = { id: { type: "string" } };

const DbaasService: ServiceSchema<ServiceSettingSchema, DbaasThis> = {
  name: "dbaas",
  mixins: [DbMixin({ schema: "dbaas", migrations })],

  settings: {
    rest: "/databases",
  },

  // One place turns a tenant server that is down into 503 (faults.ts); everything else passes as is.
  hooks: {
    error: {
      "*"(this: DbaasThis, _ctx: Context, err: unknown) {
        throw toClientError(err);
      },
    },
  },

  actions: {
    create: {
      rest: "POST /",
      auth: "required",
      params: { $$strict: "remove" }, // no body: anything sent is ignored
      async handler(this: DbaasThis, ctx: Context<unknown, CallerMeta>): Promise<DatabaseCreated> {
        const { row, password } = await this.provisioner.provision(ctx.meta.caller!.clientId);
        const { host, port } = this.detail(row);
        respondCreated(ctx.meta, `/api/databases/${row.id}`);
        return {
          id: row.id,
          databaseName: row.database_name,
          host,
          port,
          username: row.username,
          password,
          connectionString: `postgresql://${row.username}:${password}@${host}:${port}/${row.database_name}`,
        };
      },
    },

    list: {
      rest: "GET /",
      auth: "required",
      params: { $$strict: "remove" },
      async handler(this: DbaasThis, ctx: Context<unknown, CallerMeta>): Promise<{ databases: DatabaseDetail[] }> {
        const rows = await this.repo.listActive(ctx.meta.caller!.clientId);
        return { databases: rows.map((row) => this.detail(row)) };
      },
    },

    get: {
      rest: "GET /:id",
      auth: "required",
      params: { $$strict: "remove", ...idParam },
      async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseDetail> {
        return this.detail(await this.findOwn(ctx));
      },
    },

    destroy: {
      rest: "DELETE /:id",
      auth: "required",
      params: { $$strict: "remove", ...idParam },
      async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<{ message: string }> {
        const { id } = ctx.params;
        if (!isUuid(id)) throw notFound("Database");
        const row = await this.repo.claimForDestroy(id, ctx.meta.caller!.clientId);
        if (!row) throw notFound("Database");
        try {
          await this.provisioner.destroy(row);
        } catch (err) {
          if (!(err instanceof DestroyNotStarted)) throw err;
          await this.repo.setStatus(row.id, "active"); // nothing was dropped: it stays usable
          throw unavailable();
        }
        return { message: `Database ${row.database_name} destroyed` };
      },
    },

    /** Internal: removes what crashed provisionings left behind (also runs periodically). */
    reconcile: {
      visibility: "public",
      params: { graceS: { type: "number", min: 0, optional: true } },
      async handler(this: DbaasThis, ctx: Context<{ graceS?: number }>): Promise<ReconcileReport> {
        const graceMs = (ctx.params.graceS ?? RECONCILE_GRACE_S) * 1000;
        return this.reconcileLoop.exclusive(() => this.reconciler.reconcile(graceMs));
      },
    },

    /** Internal: measures and enforces the quota now (also runs every DBAAS_QUOTA_CHECK_S). */
    checkQuota: {
      visibility: "public",
      async handler(this: DbaasThis): Promise<QuotaReport> {
        return this.quotaLoop.runNow();
      },
    },

    /** Internal (operators): changes one database's quota and applies it at once. */
    setMaxStorage: {
      visibility: "public",
      params: { id: { type: "uuid" }, maxStorageMb: { type: "number", integer: true, positive: true } },
      async handler(this: DbaasThis, ctx: Context<{ id: string; maxStorageMb: number }>): Promise<DatabaseDetail> {
        if (!(await this.repo.setMaxStorage(ctx.params.id, ctx.params.maxStorageMb))) throw notFound("Database");
        const row = (await this.repo.find(ctx.params.id))!;
        await this.quotaLoop.exclusive(() => this.quota.check([row]));
        return this.detail((await this.repo.find(ctx.params.id))!);
      },
    },

    /** Internal: figures for the metrics service. */
    stats: {
      visibility: "public",
      async handler(this: DbaasThis): Promise<DatabaseStats> {
        return this.repo.stats();
      },
    },
  },

  methods: {
    detail(this: DbaasThis, row: DatabaseRow): DatabaseDetail {
      return {
        id: row.id,
        databaseName: row.database_name,
        host: config.dbaasPublicHost(),
        port: config.dbaasPublicPort(),
        username: row.username,
        storageMb: roundMb(Number(row.storage_bytes ?? 0) / MIB),
        maxStorageMb: row.max_storage_mb,
        createdAt: row.created_at.toISOString(),
        readOnly: row.read_only,
      };
    },

    /** The caller's active database; anything else (malformed id, another account's) is 404. */
    async findOwn(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseRow> {
      if (!isUuid(ctx.params.id)) throw notFound("Database");
      const row = await this.repo.findActive(ctx.params.id, ctx.meta.caller!.clientId);
      if (!row) throw notFound("Database");
      return row;
    },
  },

  created(this: DbaasThis) {
    this.repo = new DatabasesRepository(this.db);
    this.tenant = new TenantServer(config.dbaasAdminUrl(), { createConcurrency: config.dbaasCreateConcurrency() });
  },

  async started(this: DbaasThis) {
    const marker = `ci-platform:dbaas:${await this.repo.instanceId()}`;
    const deps = { repo: this.repo, tenant: this.tenant, marker, logger: this.logger };
    this.provisioner = new Provisioner({
      ...deps,
      limits: () => ({
        maxPerAccount: config.dbaasMaxPerAccount(),
        maxStorageMb: config.dbaasMaxStorageMb(),
        connectionLimit: config.dbaasConnectionLimit(),
      }),
    });
    this.quota = new QuotaEnforcer(deps);
    this.reconciler = new Reconciler(deps);
    this.quotaLoop = new Periodic("Quota check", () => this.quota.check(), () => config.dbaasQuotaCheckS(), this.logger);
    // Before any credential exists; retried by the reconciler if the server is down now.
    let hardened = await this.tenant.hardenServer().then(
      () => true,
      (err) => (this.logger.warn(`Tenant server not hardened yet: ${(err as Error).message}`), false),
    );
    this.reconcileLoop = new Periodic(
      "Reconciler",
      async () => {
        if (!hardened) await this.tenant.hardenServer().then(() => (hardened = true));
        return this.reconciler.reconcile(RECONCILE_GRACE_S * 1000);
      },
      () => config.dbaasReconcileS(),
      this.logger,
    );
    // Both start in the background: a tenant server that is down must not stop the service starting.
    this.reconcileLoop.start(0);
    this.quotaLoop.start(config.dbaasQuotaCheckS() * 1000);
  },

  async stopped(this: DbaasThis) {
    await Promise.all([this.quotaLoop?.stop(), this.reconcileLoop?.stop()]);
    await this.tenant.close();
  },
};

export default DbaasService;
