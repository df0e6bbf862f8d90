/**
 * On-demand PostgreSQL databases per account (spec 4.11–4.14), hosted on the tenant server
 * (DBAAS_ADMIN_URL). The steps live in provisioner.ts, the server side in tenant-server.ts and
 * tenant-sql.ts, the quota in quota.ts, crash clean-up in reconciler.ts; this file maps requests
 * onto them.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { brokerEnv } from "../../lib/settings";
import { apiError, notFound, validationFailed } from "../../lib/errors";
import { CallerMeta, respondCreated } from "../../lib/identity";
import { isUuid } from "../../lib/uuid";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { Database, DatabaseCreated, DatabaseDetail, DatabaseList, Message } from "./contract";
import { DatabaseRow, DatabasesRepository, roundMb } from "./databases.repository";
import { toClientError, unavailable } from "./faults";
import { migrations } from "./migrations";
import { DestroyNotStarted, Provisioner } from "./provisioner";
import { MIB, QuotaEnforcer, QuotaReport } from "./quota";
import { QuotaWatch } from "./quota-watch";
import { OwnerLease } from "./owner-lease";
import { guardIo, MISSING_ADMIN_URL, TenantServerRefused, verifyTenantServer } from "./server-guard";
import type { DatabaseStats } from "./stats";
import { Reconciler, ReconcileReport } from "./reconciler";
import { Periodic } from "./periodic";
import { StorageSampler } from "./usage-sampler";
import { QuotaGate } from "../../lib/quota-gate";
import { platformSettingsOf } from "../../lib/platform-settings";
import { ownChannel, sendToChannel } from "../../lib/channels";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";
import { TenantServer } from "./tenant-server";
import { SnapshotsRepository } from "./snapshots.repository";
import { Snapshotter } from "./snapshotter";
import { SnapshotStore } from "./snapshot-store";
import { branchRestore, snapshotActions, snapshotMethods } from "./snapshot-actions";
import { credentialActions, credentialMethods } from "./credential-actions";
import { debianBinDir } from "./pg-tools";
import { DbaasSettings, parseDbaasSettings } from "./settings";

export type { DatabaseCreated, DatabaseDetail } from "./contract";

/** How often records are checked for a dead owner between reconciler passes (one cheap query); one found starts a pass at once. */
const ABANDONED_CHECK_S = 2;

export type DbaasThis = Service &
  DbThis & {
    config: DbaasSettings;
    repo: DatabasesRepository;
    tenant: TenantServer;
    provisioner: Provisioner;
    quota: QuotaEnforcer;
    snapshots: SnapshotsRepository;
    snapshotter: Snapshotter;
    /** Why snapshots cannot be taken or restored here (tools of another version); checked once the server answers. */
    snapshotsBlocked?: Promise<string | undefined>;
    requireSnapshots(): Promise<void>;
    quotaWatch: QuotaWatch;
    lease: OwnerLease;
    /** `?sslmode=…` for connection strings (DBAAS_SSLMODE; `auto` asks the server once it answers). */
    sslSuffix?: string;
    resolveSslMode(): Promise<void>;
    /** The tenant server passed server-guard.ts (false while it could not be reached). */
    serverVerified: boolean;
    verifyServer(): Promise<boolean>;
    applyCatalogLevel(): Promise<void>;
    housekeeping(graceMs: number): Promise<ReconcileReport>;
    reconciler: Reconciler;
    quotaLoop: Periodic<QuotaReport>;
    reconcileLoop: Periodic<ReconcileReport>;
    sampler: StorageSampler;
    gate: QuotaGate;
    sampleLoop: Periodic<number>;
    detail(row: DatabaseRow): DatabaseDetail;
    connectionString(row: DatabaseRow, password: string): string;
    findOwn(ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseRow>;
    findReady(ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseRow>;
  };

const idParam = { id: { type: "string" } };
type CreateParams = { fromSnapshot?: string; maxStorageMb?: number };

const DbaasService: ServiceSchema<ServiceSettingSchema, DbaasThis> = {
  name: "dbaas",
  publishes: [USAGE_CHANNEL],
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
      openapi: {
        tag: "databases",
        summary: "Provision a PostgreSQL database",
        description:
          "The password and connection string are shown in this response only. Optional body: fromSnapshot (a ready snapshot of the account: the new database starts with its data), maxStorageMb (at most DBAAS_MAX_STORAGE_MB, within the account's storage quota).",
        status: 201,
        response: DatabaseCreated,
        errors: ["VALIDATION_FAILED", "NOT_FOUND", "INVALID_STATE", "QUOTA_EXCEEDED", "SERVICE_UNAVAILABLE"],
      },
      params: {
        $$strict: "remove", // fields beyond these are ignored
        fromSnapshot: { type: "string", optional: true, min: 1, max: 100 },
        maxStorageMb: { type: "number", integer: true, positive: true, optional: true },
      },
      async handler(this: DbaasThis, ctx: Context<CreateParams, CallerMeta>): Promise<DatabaseCreated> {
        const fromSnapshot = ctx.params.fromSnapshot ?? undefined; // null: as absent
        const maxStorageMb = ctx.params.maxStorageMb ?? undefined;
        if (maxStorageMb !== undefined && maxStorageMb > this.config.maxStorageMb)
          throw validationFailed([{ field: "maxStorageMb", message: `must be at most ${this.config.maxStorageMb} (MB per database)` }]);
        // Monthly credits, the account's storage and its (overridable) number of databases; the provisioner still holds DBAAS_MAX_PER_ACCOUNT race-free.
        await this.gate.check(ctx.meta.caller!.clientId, ["credits", "storageMb", "databases"]);
        if (!(await this.verifyServer())) throw unavailable();
        const clientId = ctx.meta.caller!.clientId;
        const restore = fromSnapshot === undefined ? undefined : await branchRestore(this, fromSnapshot, clientId);
        const { row, password } = await this.provisioner.provision(clientId, { maxStorageMb, restore });
        const { host, port } = this.detail(row);
        respondCreated(ctx.meta, `/api/databases/${row.id}`);
        return {
          id: row.id,
          databaseName: row.database_name,
          host,
          port,
          username: row.username,
          password,
          connectionString: this.connectionString(row, password),
        };
      },
    },

    list: {
      rest: "GET /",
      auth: "required",
      openapi: { tag: "databases", summary: "The caller's active databases, newest first", status: 200, response: DatabaseList },
      params: { $$strict: "remove" },
      async handler(this: DbaasThis, ctx: Context<unknown, CallerMeta>): Promise<{ databases: DatabaseDetail[] }> {
        const rows = await this.repo.listActive(ctx.meta.caller!.clientId);
        return { databases: rows.map((row) => this.detail(row)) };
      },
    },

    get: {
      rest: "GET /:id",
      auth: "required",
      openapi: { tag: "databases", summary: "One database", status: 200, response: Database, errors: ["NOT_FOUND"] },
      params: { $$strict: "remove", ...idParam },
      async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseDetail> {
        return this.detail(await this.findOwn(ctx));
      },
    },

    destroy: {
      rest: "DELETE /:id",
      auth: "required",
      openapi: { tag: "databases", summary: "Destroy a database and all its data (irreversible)", status: 200, response: Message, errors: ["NOT_FOUND"] },
      params: { $$strict: "remove", ...idParam },
      async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<Message> {
        const { id } = ctx.params;
        if (!isUuid(id)) throw notFound("Database");
        const row = await this.repo.claimForDestroy(id, ctx.meta.caller!.clientId, this.lease.id);
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

    ...credentialActions,
    ...snapshotActions,

    /** Internal: removes what crashed provisionings left behind (also runs periodically). */
    reconcile: {
      visibility: "public",
      callers: [], // operators, in-process only
      params: { graceS: { type: "number", min: 0, optional: true } },
      async handler(this: DbaasThis, ctx: Context<{ graceS?: number }>): Promise<ReconcileReport> {
        const graceMs = (ctx.params.graceS ?? this.config.reconcileGraceS) * 1000;
        return this.reconcileLoop.exclusive(() => this.housekeeping(graceMs));
      },
    },

    /** Internal: measures and enforces the quota now (also runs every DBAAS_QUOTA_CHECK_S). */
    checkQuota: {
      visibility: "public",
      callers: [], // operators, in-process only
      async handler(this: DbaasThis): Promise<QuotaReport> {
        const report = await this.quotaLoop.exclusive(() => this.quotaWatch.full());
        this.quotaLoop.runWithin(this.quotaWatch.intervalS() * 1000); // a database near its quota is watched from now on
        return report;
      },
    },

    /** Internal (operators): changes one database's quota and applies it at once. */
    setMaxStorage: {
      visibility: "public",
      callers: [], // operators, in-process only
      params: { id: { type: "uuid" }, maxStorageMb: { type: "number", integer: true, positive: true } },
      async handler(this: DbaasThis, ctx: Context<{ id: string; maxStorageMb: number }>): Promise<DatabaseDetail> {
        if (!(await this.repo.setMaxStorage(ctx.params.id, ctx.params.maxStorageMb))) throw notFound("Database");
        const row = (await this.repo.find(ctx.params.id))!;
        await this.tenant.setTempFileLimit(row.username, ctx.params.maxStorageMb);
        await this.quotaLoop.exclusive(() => this.quota.check([row]));
        return this.detail((await this.repo.find(ctx.params.id))!);
      },
    },

    /** Internal: each account's active databases and storage now, for its usage and quotas. */
    accountState: {
      visibility: "public",
      callers: ["usage"],
      params: { clientIds: { type: "array", items: "uuid", min: 1, max: 1000 } },
      handler(this: DbaasThis, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, { databases: number; storageMb: number }>> {
        return this.sampler.accountState(ctx.params.clientIds);
      },
    },

    /** Internal: reports this hour's storage of every active database to the usage ledger now (also every DBAAS_USAGE_SAMPLE_S). */
    sampleUsage: {
      visibility: "public",
      callers: [], // operators and tests, in-process only
      handler(this: DbaasThis): Promise<number> {
        return this.sampleLoop.runNow();
      },
    },

    /** Internal: figures for the metrics service. */
    stats: {
      visibility: "public",
      callers: ["metrics"],
      async handler(this: DbaasThis): Promise<DatabaseStats> {
        return this.repo.stats();
      },
    },
  },

  methods: {
    ...credentialMethods,
    ...snapshotMethods,
    detail(this: DbaasThis, row: DatabaseRow): DatabaseDetail {
      return {
        id: row.id,
        databaseName: row.database_name,
        host: this.config.publicHost,
        port: this.config.publicPort,
        username: row.username,
        storageMb: roundMb(Number(row.storage_bytes ?? 0) / MIB),
        maxStorageMb: row.max_storage_mb,
        createdAt: row.created_at.toISOString(),
        readOnly: row.read_only,
      };
    },

    /** Runs the server checks again while they could not be made; a refused server stays refused (503). */
    async verifyServer(this: DbaasThis): Promise<boolean> {
      if (this.serverVerified) return true;
      try {
        this.serverVerified = await verifyTenantServer(guardIo(this.tenant, this.db), this.config.allowStateServer);
        if (this.serverVerified) await this.resolveSslMode();
      } catch (err) {
        this.logger.error((err as Error).message);
        if (!(err instanceof TenantServerRefused)) throw err;
      }
      return this.serverVerified;
    },

    /**
     * Brings every active database whose catalog is at another level (provisioned under another
     * DBAAS_HIDE_CATALOG, or before levels were recorded) to the configured one, hiding or opening
     * as needed (one failure stops no other; it is tried again at the next round).
     */
    async applyCatalogLevel(this: DbaasThis): Promise<void> {
      const level = this.config.hideCatalog;
      for (const row of await this.repo.listCatalogNotAt(level)) {
        try {
          await this.tenant.setCatalogLevel(row.database_name, level);
          await this.repo.markCatalogLevel(row.id, level);
        } catch (err) {
          this.logger.warn(`Catalog of database ${row.database_name} not at level ${level} yet: ${(err as Error).message}`);
        }
      }
    },

    /** One reconciler pass, then the catalog level and logins a crashed freeze left blocked (each retried next pass if it fails). */
    async housekeeping(this: DbaasThis, graceMs: number): Promise<ReconcileReport> {
      const report = await this.reconciler.reconcile(graceMs);
      await this.applyCatalogLevel();
      await this.provisioner.repairBlockedLogins();
      await this.snapshotter.recover();
      return report;
    },

    /** The caller's active database; anything else (malformed id, another account's) is 404. */
    async findOwn(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseRow> {
      if (!isUuid(ctx.params.id)) throw notFound("Database");
      const row = await this.repo.findActive(ctx.params.id, ctx.meta.caller!.clientId);
      if (!row) throw notFound("Database");
      return row;
    },

    /** The caller's database, active: 404 as findOwn, 409 INVALID_STATE while it is being provisioned or destroyed. */
    async findReady(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseRow> {
      if (!isUuid(ctx.params.id)) throw notFound("Database");
      const row = await this.repo.findOwned(ctx.params.id, ctx.meta.caller!.clientId);
      if (!row) throw notFound("Database");
      if (row.status !== "active")
        throw apiError("INVALID_STATE", `Database is ${row.status === "provisioning" ? "still being provisioned" : "being destroyed"}`);
      return row;
    },
  },

  created(this: DbaasThis) {
    // A bad value (an unknown DBAAS_HIDE_CATALOG, a number that is none) stops the start here, before anything is touched.
    this.config = parseDbaasSettings(brokerEnv(this.broker));
    this.repo = new DatabasesRepository(this.db);
    this.gate = new QuotaGate(this.broker, platformSettingsOf(this.broker).quotaCacheMs, (m) => this.logger.warn(m));
    this.sampler = new StorageSampler(this.db, (batch) => sendToChannel(this.broker, ownChannel(USAGE_CHANNEL, this.broker.nodeID), batch));
    this.sampleLoop = new Periodic(
      "Storage usage sample",
      () => this.sampler.sample(),
      () => this.config.usageSampleS,
      this.logger,
    );
    this.snapshots = new SnapshotsRepository(this.db);
  },

  async started(this: DbaasThis) {
    const adminUrl = this.config.adminUrl;
    if (!adminUrl) throw new Error(MISSING_ADMIN_URL);
    this.tenant = new TenantServer(adminUrl, { createConcurrency: this.config.createConcurrency, dumpConcurrency: this.config.snapshotConcurrency });
    // A server that checks no passwords, or the state server without opt-in, stops the start here;
    // one that cannot be reached now is checked again before the first provisioning.
    this.serverVerified = await verifyTenantServer(guardIo(this.tenant, this.db), this.config.allowStateServer);
    if (!this.serverVerified) this.logger.warn("Tenant server unreachable: its checks run again before the first provisioning");
    else await this.resolveSslMode();
    this.lease = new OwnerLease(this.dbUrl, this.logger);
    await this.lease.start();
    const marker = `ci-platform:dbaas:${await this.repo.instanceId()}`;
    const deps = { repo: this.repo, tenant: this.tenant, marker, logger: this.logger };
    this.provisioner = new Provisioner({
      ...deps,
      owner: this.lease.id,
      limits: {
        maxPerAccount: this.config.maxPerAccount,
        maxStorageMb: this.config.maxStorageMb,
        accountStorageMb: this.config.accountStorageMb,
        connections: {
          perAccount: this.config.connectionsPerAccount,
          perDatabase: this.config.connectionLimit,
          reserved: this.config.reservedConnections,
        },
        catalogLevel: this.config.hideCatalog,
      },
    });
    this.quota = new QuotaEnforcer(deps);
    const store = new SnapshotStore(this.config.snapshotDir);
    await store.init();
    const binDir = this.config.pgBinDir || (await this.tenant.serverMajor().then(debianBinDir, () => ""));
    this.snapshotter = new Snapshotter({
      repo: this.snapshots,
      store,
      tenant: this.tenant,
      binDir,
      owner: this.lease.id,
      limits: { perAccount: this.config.snapshotsPerAccount, accountStorageMb: this.config.accountStorageMb },
      logger: this.logger,
    });
    // Said at start when the server answers (and checked again before the first snapshot when it does not).
    void this.requireSnapshots().catch(() => undefined);
    this.quotaWatch = new QuotaWatch({
      enforcer: this.quota,
      repo: this.repo,
      tenant: this.tenant,
      fullS: () => this.config.quotaCheckS,
      tickS: () => this.config.quotaNearCheckS,
      busyRows: () => this.config.quotaBusyRows,
      samples: () => this.config.quotaSamples,
    });
    this.reconciler = new Reconciler(deps);
    this.quotaLoop = new Periodic(
      "Quota check",
      () => this.quotaWatch.round(),
      () => this.quotaWatch.intervalS(),
      this.logger,
    );
    // Before any credential exists; retried by the reconciler if the server is down now.
    let hardened = await this.tenant.hardenServer().then(
      () => true,
      (err) => (this.logger.warn(`Tenant server not hardened yet: ${(err as Error).message}`), false),
    );
    // A pass every DBAAS_RECONCILE_S, and one as soon as a record's process is found dead (its lease freed).
    let lastPassMs = -Infinity;
    this.reconcileLoop = new Periodic(
      "Reconciler",
      async () => {
        const due = Date.now() - lastPassMs >= this.config.reconcileS * 1000;
        if (!due && !(await this.repo.hasAbandoned())) return { databasesDropped: 0, rolesDropped: 0, recordsDeleted: 0, failed: 0 };
        lastPassMs = Date.now();
        if (!hardened) await this.tenant.hardenServer().then(() => (hardened = true));
        return this.housekeeping(this.config.reconcileGraceS * 1000);
      },
      () => Math.min(this.config.reconcileS, ABANDONED_CHECK_S),
      this.logger,
    );
    // Both start in the background: a tenant server that is down must not stop the service starting.
    this.reconcileLoop.start(0);
    this.quotaLoop.start(this.quotaWatch.intervalS() * 1000);
    this.sampleLoop.start(this.config.usageSampleS * 1000);
  },

  async stopped(this: DbaasThis) {
    await Promise.all([this.quotaLoop?.stop(), this.reconcileLoop?.stop(), this.sampleLoop?.stop(), this.snapshotter?.stop()]);
    await Promise.all([this.tenant?.close(), this.lease?.stop()]);
  },
};

export default DbaasService;
