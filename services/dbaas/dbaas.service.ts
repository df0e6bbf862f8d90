/**
 * On-demand PostgreSQL databases per account (spec 4.11–4.14), hosted on the tenant server
 * (DBAAS_ADMIN_URL). This file maps requests onto the app (app.ts: the provisioner, quota,
 * reconciler, snapshotter and their jobs, wired once): every handler hands over in one line, to
 * database-ops.ts here and to credential-actions.ts and snapshot-actions.ts for their routes.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { CallerMeta } from "../../lib/identity";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { tokenDatabaseHooks } from "./token-databases";
import { createDbaasApp, WithApp } from "./app";
import { Database, DatabaseCreated, DatabaseDetail, DatabaseList, Message } from "./contract";
import { credentialActions } from "./credential-actions";
import {
  baseBackupNow,
  databaseStats,
  checkQuotaNow,
  createDatabase,
  CreateParams,
  destroyDatabase,
  getDatabase,
  listDatabases,
  reconcileNow,
  setMaxStorage,
} from "./database-ops";
import { toClientError } from "./faults";
import { jobRoleActions } from "./job-roles";
import { migrations } from "./migrations";
import type { QuotaReport } from "./quota";
import type { ReconcileReport } from "./reconciler";
import { snapshotActions } from "./snapshot-actions";
import type { DatabaseStats } from "./stats";

export type { DatabaseCreated, DatabaseDetail } from "./contract";

type DbaasThis = Service & DbThis & WithApp;

const idParam = { id: { type: "string" } };
/** dbaas.baseBackup: pg_basebackup of the whole tenant cluster, minutes on a large one. */
const BASE_BACKUP_TIMEOUT_MS = 10 * 60_000;

const DbaasService: ServiceSchema<ServiceSettingSchema, DbaasThis> = {
  name: "dbaas",
  publishes: [USAGE_CHANNEL],
  mixins: [DbMixin({ schema: "dbaas", migrations })],

  settings: {
    rest: "/databases",
  },

  // One place turns a tenant server that is down into 503 (faults.ts); everything else passes as is.
  // A restricted token sees only its databases (token-databases.ts): others are 404.
  hooks: {
    ...tokenDatabaseHooks,
    error: {
      "*"(_ctx: Context, err: unknown) {
        throw toClientError(err);
      },
    },
  },

  actions: {
    create: {
      rest: "POST /",
      auth: "required",
      scope: "databases:write",
      openapi: {
        tag: "databases",
        summary: "Provision a PostgreSQL database",
        description:
          "The password and connection string are shown in this response only. Optional body: fromSnapshot (a ready snapshot of the account: the new database starts with its data), restoreFrom { databaseId, timestamp } (the account's database, active or destroyed, as it was at that moment of its restore window), maxStorageMb (at most DBAAS_MAX_STORAGE_MB, within the account's storage quota). A restore answers 202 at once with status restoring; the detail then says active, or failed with statusReason.",
        status: 201,
        response: DatabaseCreated,
        errors: ["VALIDATION_FAILED", "NOT_FOUND", "INVALID_STATE", "QUOTA_EXCEEDED", "OUT_OF_RESTORE_WINDOW", "SERVICE_UNAVAILABLE"],
      },
      params: {
        $$strict: "remove", // fields beyond these are ignored
        fromSnapshot: { type: "string", optional: true, min: 1, max: 100 },
        restoreFrom: {
          type: "object",
          optional: true,
          strict: true,
          props: { databaseId: { type: "string", min: 1, max: 100 }, timestamp: { type: "string", min: 1, max: 64 } },
        },
        maxStorageMb: { type: "number", integer: true, positive: true, optional: true },
      },
      async handler(this: DbaasThis, ctx: Context<CreateParams, CallerMeta>): Promise<DatabaseCreated> {
        return createDatabase(this.app, ctx.params, ctx.meta);
      },
    },

    list: {
      rest: "GET /",
      auth: "required",
      scope: "databases:read",
      openapi: { tag: "databases", summary: "The caller's active databases, newest first", status: 200, response: DatabaseList },
      params: { $$strict: "remove" },
      async handler(this: DbaasThis, ctx: Context<unknown, CallerMeta>): Promise<{ databases: DatabaseDetail[] }> {
        return listDatabases(this.app, ctx.meta.caller!.clientId);
      },
    },

    get: {
      rest: "GET /:id",
      auth: "required",
      scope: "databases:read",
      openapi: { tag: "databases", summary: "One database", status: 200, response: Database, errors: ["NOT_FOUND"] },
      params: { $$strict: "remove", ...idParam },
      async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<DatabaseDetail> {
        return getDatabase(this.app, ctx.params.id, ctx.meta.caller!.clientId);
      },
    },

    destroy: {
      rest: "DELETE /:id",
      auth: "required",
      scope: "databases:write",
      openapi: { tag: "databases", summary: "Destroy a database and all its data (irreversible)", status: 200, response: Message, errors: ["NOT_FOUND"] },
      params: { $$strict: "remove", ...idParam },
      async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<Message> {
        return destroyDatabase(this.app, ctx.params.id, ctx.meta.caller!.clientId);
      },
    },

    ...credentialActions,
    ...snapshotActions,
    ...jobRoleActions,

    /** Internal: removes what crashed provisionings left behind (also runs periodically). */
    reconcile: {
      visibility: "public",
      callers: [], // operators, in-process only
      params: { graceS: { type: "number", min: 0, optional: true } },
      async handler(this: DbaasThis, ctx: Context<{ graceS?: number }>): Promise<ReconcileReport> {
        return reconcileNow(this.app, ctx.params.graceS);
      },
    },

    /** Internal (operators, tests): a base backup for point-in-time restore now (also every DBAAS_PITR_BASEBACKUP_H). */
    baseBackup: {
      visibility: "public",
      callers: [], // operators and tests, in-process only
      // A copy of the whole tenant cluster: longer than a request's default 30 s on a busy or large one.
      timeout: BASE_BACKUP_TIMEOUT_MS,
      async handler(this: DbaasThis): Promise<{ id: string; endedAt: string }> {
        return baseBackupNow(this.app);
      },
    },

    /** Internal: measures and enforces the quota now (also runs every DBAAS_QUOTA_CHECK_S). */
    checkQuota: {
      visibility: "public",
      callers: [], // operators, in-process only
      async handler(this: DbaasThis): Promise<QuotaReport> {
        return checkQuotaNow(this.app);
      },
    },

    /** Internal (operators): changes one database's quota and applies it at once. */
    setMaxStorage: {
      visibility: "public",
      callers: [], // operators, in-process only
      params: { id: { type: "uuid" }, maxStorageMb: { type: "number", integer: true, positive: true } },
      async handler(this: DbaasThis, ctx: Context<{ id: string; maxStorageMb: number }>): Promise<DatabaseDetail> {
        return setMaxStorage(this.app, ctx.params.id, ctx.params.maxStorageMb);
      },
    },

    /** Internal: each account's active databases and storage now, for its usage and quotas. */
    accountState: {
      visibility: "public",
      callers: ["usage"],
      params: { clientIds: { type: "array", items: "uuid", min: 1, max: 1000 } },
      handler(this: DbaasThis, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, { databases: number; storageMb: number }>> {
        return this.app.sampler.accountState(ctx.params.clientIds);
      },
    },

    /** Internal: reports this hour's storage of every active database to the usage ledger now (also every DBAAS_USAGE_SAMPLE_S). */
    sampleUsage: {
      visibility: "public",
      callers: [], // operators and tests, in-process only
      handler(this: DbaasThis): Promise<number> {
        return this.app.sampleLoop.runNow();
      },
    },

    /** Internal: figures for the metrics service. */
    stats: {
      visibility: "public",
      callers: ["metrics"],
      async handler(this: DbaasThis): Promise<DatabaseStats> {
        return databaseStats(this.app);
      },
    },
  },

  created(this: DbaasThis) {
    this.app = createDbaasApp(this);
  },

  async started(this: DbaasThis) {
    await this.app.start();
  },

  async stopped(this: DbaasThis) {
    await this.app.stop();
  },
};

export default DbaasService;
