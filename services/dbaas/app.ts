/**
 * dbaas put together: the repositories, the tenant server (checked by server-guard.ts), the
 * provisioner, quota, reconciler and snapshotter, and the periodic jobs, wired once from the
 * settings (createDbaasApp) and started and stopped with the service. The action modules
 * (database-ops.ts, credential-actions.ts, snapshot-actions.ts, lookups.ts) work on the DbaasApp it
 * returns; its housekeeping pass is housekeeping.ts.
 */
import type { LoggerInstance, Service } from "moleculer";
import type { Pool } from "pg";
import { apiError } from "../../lib/errors";
import { ownChannel, sendToChannel } from "../../lib/channels";
import { platformSettingsOf } from "../../lib/platform-settings";
import { QuotaGate } from "../../lib/quota-gate";
import { brokerEnv } from "../../lib/settings";
import { USAGE_CHANNEL, UsageBatch } from "../../lib/usage-protocol";
import type { DbThis } from "../../mixins/db.mixin";
import { DatabasesRepository } from "./databases.repository";
import { Extensions } from "./extensions";
import { PointInTime } from "./pitr";
import { RestoreJobs } from "./pitr-jobs";
import { PitrStore } from "./pitr-store";
import { RestoreSources } from "./restore-sources.repository";
import type { GuardConfig } from "./guard-sql";
import { JobRolesRepository } from "./job-roles.repository";
import { OwnerLease } from "./owner-lease";
import { Periodic } from "./periodic";
import { debianBinDir } from "./pg-tools";
import { Provisioner } from "./provisioner";
import { QuotaEnforcer, QuotaReport } from "./quota";
import { QuotaWatch } from "./quota-watch";
import { Reconciler, ReconcileReport } from "./reconciler";
import { housekeepingPass } from "./housekeeping";
import { guardIo, MISSING_ADMIN_URL, TenantServerRefused, verifyTenantServer } from "./server-guard";
import { DbaasSettings, parseDbaasSettings } from "./settings";
import { SnapshotStore } from "./snapshot-store";
import { SnapshotsRepository } from "./snapshots.repository";
import { Snapshotter } from "./snapshotter";
import { TenantServer } from "./tenant-server";
import { StorageSampler } from "./usage-sampler";

/** How often records are checked for a dead owner between reconciler passes (one cheap query); one found starts a pass at once. */
const ABANDONED_CHECK_S = 2;

/** What the app takes from its Moleculer service: the settings, the state database, the log, and the bus. */
export type DbaasDeps = {
  config: DbaasSettings;
  db: Pool;
  dbUrl: string;
  logger: LoggerInstance;
  gate: QuotaGate;
  publishUsage: (batch: UsageBatch) => Promise<void>;
};

/** The `this` of every dbaas action handler: each hands over to the app in one line. */
export type WithApp = { app: DbaasApp };

/**
 * dbaas.service.ts's `created`: a bad value (an unknown DBAAS_HIDE_CATALOG, a number that is none)
 * stops the start here, before anything is touched.
 */
export function createDbaasApp(service: Service & DbThis): DbaasApp {
  const { broker, logger } = service;
  return new DbaasApp({
    config: parseDbaasSettings(brokerEnv(broker)),
    db: service.db,
    dbUrl: service.dbUrl,
    logger,
    gate: new QuotaGate(broker, platformSettingsOf(broker).quotaCacheMs, (m) => logger.warn(m)),
    publishUsage: (batch) => sendToChannel(broker, ownChannel(USAGE_CHANNEL, broker.nodeID), batch),
  });
}

export class DbaasApp {
  readonly config: DbaasSettings;
  readonly logger: LoggerInstance;
  readonly repo: DatabasesRepository;
  readonly snapshots: SnapshotsRepository;
  readonly jobRoles: JobRolesRepository;
  readonly gate: QuotaGate;
  readonly sampler: StorageSampler;
  readonly sampleLoop: Periodic<number>;

  // Set by start(); stop() copes with a start that failed half-way. Tests swap the provisioner and snapshotter.
  tenant!: TenantServer;
  lease!: OwnerLease;
  provisioner!: Provisioner;
  quota!: QuotaEnforcer;
  snapshotter!: Snapshotter;
  quotaWatch!: QuotaWatch;
  reconciler!: Reconciler;
  extensions!: Extensions;
  restoreSources: RestoreSources;
  /** Point-in-time restore, when the tenant server's WAL archive is configured (DBAAS_PITR_WAL_DIR). */
  pitr?: PointInTime;
  /** Restores filling in the background, and those a dead process left (pitr-jobs.ts). */
  restoreJobs!: RestoreJobs;
  backupLoop?: Periodic<void>;
  quotaLoop!: Periodic<QuotaReport>;
  reconcileLoop!: Periodic<ReconcileReport>;

  /** The tenant server passed server-guard.ts (false while it could not be reached). */
  serverVerified = false;
  /** `?sslmode=…` for connection strings (DBAAS_SSLMODE; `auto` asks the server once it answers). */
  sslSuffix?: string;
  /** Why snapshots cannot be taken or restored here (tools of another version); checked once the server answers. */
  snapshotsBlocked?: Promise<string | undefined>;

  constructor(private readonly deps: DbaasDeps) {
    this.config = deps.config;
    this.logger = deps.logger;
    this.repo = new DatabasesRepository(deps.db);
    this.gate = deps.gate;
    this.sampler = new StorageSampler(deps.db, deps.publishUsage);
    this.sampleLoop = new Periodic(
      "Storage usage sample",
      () => this.sampler.sample(),
      () => this.config.usageSampleS,
      this.logger,
    );
    this.snapshots = new SnapshotsRepository(deps.db);
    this.jobRoles = new JobRolesRepository(deps.db);
    this.restoreSources = new RestoreSources(deps.db);
  }

  async start(): Promise<void> {
    const adminUrl = this.config.adminUrl;
    if (!adminUrl) throw new Error(MISSING_ADMIN_URL);
    this.tenant = new TenantServer(adminUrl, { createConcurrency: this.config.createConcurrency, dumpConcurrency: this.config.snapshotConcurrency });
    // A server that checks no passwords, or the state server without opt-in, stops the start here;
    // one that cannot be reached now is checked again before the first provisioning.
    this.serverVerified = await verifyTenantServer(guardIo(this.tenant, this.deps.db), this.config.allowStateServer);
    if (!this.serverVerified) this.logger.warn("Tenant server unreachable: its checks run again before the first provisioning");
    else await this.resolveSslMode();
    this.lease = new OwnerLease(this.deps.dbUrl, this.logger);
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
        guard: this.guard(),
      },
    });
    this.restoreJobs = new RestoreJobs({ ...deps, rebalance: (clientId) => this.provisioner.rebalance(clientId) });
    this.quota = new QuotaEnforcer(deps);
    this.extensions = new Extensions({ ...deps, guard: this.guard() });
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
    await this.startPitr();
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
  }

  async stop(): Promise<void> {
    this.pitr?.stop();
    await Promise.all([
      this.quotaLoop?.stop(),
      this.reconcileLoop?.stop(),
      this.sampleLoop?.stop(),
      this.snapshotter?.stop(),
      this.backupLoop?.stop(),
      this.restoreJobs?.stop(),
    ]);
    await Promise.all([this.tenant?.close(), this.lease?.stop()]);
  }

  /** With a WAL archive: point-in-time restore, and a base backup whenever the newest is DBAAS_PITR_BASEBACKUP_H old (checked every minute). */
  private async startPitr(): Promise<void> {
    const { pitrWalDir, pitrDir, pitrRetentionH, pitrBaseBackupH } = this.config;
    if (!pitrWalDir) return;
    const store = new PitrStore(pitrDir, pitrWalDir, (tool) => this.snapshotter.bin(tool));
    await store.init();
    const deps = { store, tenant: this.tenant, sources: this.restoreSources, snapshotter: this.snapshotter, logger: this.logger };
    const pitr = (this.pitr = new PointInTime({ ...deps, retentionMs: pitrRetentionH * 3_600_000 }));
    this.backupLoop = new Periodic(
      "Base backup",
      () => pitr.backupIfDue(pitrBaseBackupH * 3_600_000),
      () => 60,
      this.logger,
    );
    this.backupLoop.start(0);
  }

  /** The platform's objects in every client database: the extension guard, and the pooler's lookup when a pooled endpoint is configured. */
  guard(): GuardConfig {
    return { extensions: this.config.extensions, ...(this.config.pooledPort ? { poolerRole: this.config.poolerRole } : {}) };
  }

  /** Runs the server checks again while they could not be made; a refused server stays refused (503). */
  async verifyServer(): Promise<boolean> {
    if (this.serverVerified) return true;
    try {
      this.serverVerified = await verifyTenantServer(guardIo(this.tenant, this.deps.db), this.config.allowStateServer);
      if (this.serverVerified) await this.resolveSslMode();
    } catch (err) {
      this.logger.error((err as Error).message);
      if (!(err instanceof TenantServerRefused)) throw err;
    }
    return this.serverVerified;
  }

  /** Settles the sslmode of connection strings; with `auto`, `require` when the server has TLS on. */
  async resolveSslMode(): Promise<void> {
    const mode = this.config.sslMode;
    if (mode !== "auto") this.sslSuffix = mode === "off" ? "" : `?sslmode=${mode}`;
    else if (this.sslSuffix === undefined) this.sslSuffix = (await this.tenant.hasTls()) ? "?sslmode=require" : "";
  }

  /** 503 when the tools cannot serve the tenant server (said once in the log at start). */
  async requireSnapshots(): Promise<void> {
    this.snapshotsBlocked ??= this.snapshotter.checkTools().then((reason) => {
      if (reason) this.logger.error(`Snapshots and branches refused: ${reason}`);
      return reason;
    });
    // A server that could not be reached is asked again next time.
    const reason = await this.snapshotsBlocked.catch((err) => {
      this.snapshotsBlocked = undefined;
      throw err;
    });
    if (reason) throw apiError("SERVICE_UNAVAILABLE", "Snapshots are not available on this platform right now (the operator is told why in the dbaas log)");
  }

  /** One housekeeping pass (housekeeping.ts). */
  housekeeping(graceMs: number): Promise<ReconcileReport> {
    return housekeepingPass(this, graceMs);
  }
}
