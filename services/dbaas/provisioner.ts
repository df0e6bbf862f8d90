/**
 * Provisioning and destroying, step by step. The intent is recorded before anything exists on
 * the tenant server, so a crash at any point leaves a record the reconciler can act on; a failure
 * at any step is compensated here (database, then role, then record), so nothing is left behind.
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import type { CatalogLevel } from "./settings";
import { apiError } from "../../lib/errors";
import { generatePassword, scramVerifier } from "./credentials";
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import { isDuplicate, isUnavailable, retryTransient } from "./faults";
import { generateNames, holdRoleOf, RandomHex, defaultRandomHex, TenantNames } from "./naming";
import type { TenantServer } from "./tenant-server";
import { GuardConfig, guardPolicy } from "./guard-sql";
import { ConnectionPolicy, connectionRoom, splitConnections, tooManyDatabases } from "./connections";

export const PROVISION_STEPS = ["record", "role", "database", "grants", "schema", "activate"] as const;
/** A branch restores its snapshot into the new database before it becomes active. */
export const BRANCH_STEPS = ["record", "role", "database", "grants", "schema", "restore", "activate"] as const;
export type ProvisionStep = (typeof BRANCH_STEPS)[number];

export type ProvisionLimits = {
  maxPerAccount: number;
  maxStorageMb: number;
  /** The account's storage (its databases' maxima plus its snapshots), MiB; undefined: no such quota. */
  accountStorageMb?: number;
  connections: ConnectionPolicy;
  /** What of the catalog the tenant cannot read (tenant-sql.ts hiddenAt), recorded with the database. */
  catalogLevel: CatalogLevel;
  /** The platform's objects in each new database: extension guard, pooler lookup (guard-sql.ts). */
  guard: GuardConfig;
};
/** `filled`: with a background restore, settles once the database is active or failed (never rejects). */
export type Provisioned = { row: DatabaseRow; password: string; filled?: Promise<void> };
export type Filler = (names: TenantNames, password: string) => Promise<void>;
export type ProvisionOptions = {
  /** This database's storage quota (already checked against DBAAS_MAX_STORAGE_MB); default the limits' maxStorageMb. */
  maxStorageMb?: number;
  /** Fills the new, empty database (a branch), given its names and its role's password. */
  restore?: Filler;
  /**
   * A point-in-time restore (pitr-jobs.ts): recorded with the database, which is answered while
   * `restore` fills it in the background; a failure then ends the record `failed` with the reason.
   */
  background?: { restoreOf: string; restoreTo: Date; reasonOf: (err: unknown) => string };
};

export type ProvisionerDeps = {
  repo: DatabasesRepository;
  tenant: TenantServer;
  marker: string;
  limits: ProvisionLimits;
  /** This process's owner id (owner-lease.ts): its records count as live while it lives. */
  owner?: string;
  logger: LoggerInstance;
  randomHex?: RandomHex;
  newId?: () => string;
};

/** Errors raised before a connection existed: the statement never reached the server. */
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "EAI_AGAIN"]);
export function neverSent(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return (typeof code === "string" && NEVER_SENT.has(code)) || (typeof message === "string" && /timeout exceeded when trying to connect/i.test(message));
}

export class Provisioner {
  constructor(readonly deps: ProvisionerDeps) {}

  async provision(clientId: string, opts: ProvisionOptions = {}): Promise<Provisioned> {
    const { repo, tenant, marker } = this.deps;
    const limits = this.deps.limits;
    const maxStorageMb = opts.maxStorageMb ?? limits.maxStorageMb;
    const names = generateNames(clientId, this.deps.randomHex ?? defaultRandomHex);
    const id = (this.deps.newId ?? randomUUID)();
    const password = generatePassword();
    // PBKDF2 runs on the thread pool while the intent is recorded.
    const verifier = scramVerifier(password);
    verifier.catch(() => undefined); // awaited below; must not go unhandled if the record is refused
    const intent = await repo.insertProvisioning(
      { id, clientId, ...names, maxStorageMb, owner: this.deps.owner },
      limits.maxPerAccount,
      limits.accountStorageMb,
    );
    if (!intent.recorded && intent.resource === "databases")
      throw apiError("QUOTA_EXCEEDED", `An account may have at most ${limits.maxPerAccount} active databases`, {
        limit: limits.maxPerAccount,
      });
    if (!intent.recorded)
      throw apiError(
        "QUOTA_EXCEEDED",
        `The account's storage quota is ${limits.accountStorageMb} MB: ${intent.usedMb} MB are taken, ${maxStorageMb} MB do not fit`,
        {
          resource: "storageMb",
          limit: limits.accountStorageMb,
          used: intent.usedMb,
        },
      );

    // Tenant-side steps whose statement may have reached the server, hence may need undoing.
    const reached = new Set<ProvisionStep>();
    try {
      if (opts.background) await repo.markRestore(id, opts.background.restoreOf, opts.background.restoreTo);
      const secret = await verifier;
      // The account's budget of connections, split again over its databases with the new one last.
      const live = await repo.listLive(clientId);
      const policy = limits.connections;
      if (tooManyDatabases(policy, live.length))
        throw apiError("QUOTA_EXCEEDED", `An account's ${policy.perAccount} connections allow at most ${policy.perAccount} databases`, {
          resource: "connections",
          limit: policy.perAccount,
          used: live.length - 1,
        });
      const shares = splitConnections(policy, live.length);
      const others = live.map((row, i) => ({ username: row.username, limit: shares[i] })).filter((o) => o.username !== names.username);
      const share = shares[live.findIndex((row) => row.id === id)] ?? shares[shares.length - 1];
      await this.step("role", reached, async (attempt) => {
        const refused = await tenant
          .createRoleWithin(names, { verifier: secret, connectionLimit: share, marker, tempFileLimitMb: maxStorageMb, others }, (capacity) =>
            connectionRoom(policy, capacity, live.length),
          )
          .catch((err) => {
            // A retry after a lost answer finds the role our first attempt created.
            if (attempt > 1 && isDuplicate(err)) return undefined;
            throw err;
          });
        if (refused) {
          this.deps.logger.warn(`Provisioning refused: ${refused}`);
          throw apiError("SERVICE_UNAVAILABLE", "The database server has no room for more connections; retry later", null);
        }
      });
      await this.step("database", reached, (attempt) =>
        tenant.createDatabase(names).catch((err) => {
          if (attempt > 1 && isDuplicate(err)) return;
          throw err;
        }),
      );
      const bytes = await this.step("grants", reached, () => tenant.secureDatabase(names, marker));
      await this.step("schema", reached, () => tenant.prepareSchema(names, limits.catalogLevel, limits.guard));
      const { background, restore } = opts;
      if (background && restore) {
        const row = await repo.find(id);
        if (!row) throw new Error(`Database record ${id} vanished while provisioning`);
        const filled = this.fill(id, names, password, bytes, restore, reached).then(
          () => undefined,
          (err) => this.compensate(id, clientId, names, reached, err, background.reasonOf(err)),
        );
        return { row, password, filled };
      }
      return { row: await this.fill(id, names, password, bytes, restore, reached), password };
    } catch (err) {
      await this.compensate(id, clientId, names, reached, err);
      throw err;
    }
  }

  /** Restores into the new database (a branch or a restore), measures it, and makes it active. */
  private async fill(
    id: string,
    names: TenantNames,
    password: string,
    bytes: number,
    restore: Filler | undefined,
    reached: Set<ProvisionStep>,
  ): Promise<DatabaseRow> {
    const { repo, tenant, limits } = this.deps;
    if (restore) {
      await this.step("restore", reached, () => restore(names, password));
      bytes = (await tenant.measure([names])).get(names.databaseName)?.bytes ?? bytes;
    }
    const row = await repo.activate(id, bytes, limits.catalogLevel, guardPolicy(limits.guard));
    if (!row) throw new Error(`Database record ${id} vanished while provisioning`);
    return row;
  }

  /**
   * Ends open sessions, drops the database and the roles, then the record. Throws
   * DestroyNotStarted when the server could not be reached before anything was dropped.
   */
  async destroy(row: DatabaseRow): Promise<void> {
    const { tenant, repo } = this.deps;
    let dropped = false;
    try {
      await tenant.withDatabaseLock(row.database_name, async (admin) => {
        await tenant.dropDatabase(row.database_name, admin);
        dropped = true;
        await tenant.dropRoles([row.username, holdRoleOf(row.username)], admin);
      });
    } catch (err) {
      if (!dropped && neverSent(err)) throw new DestroyNotStarted(err);
      throw err;
    }
    await repo.delete(row.id);
    await this.rebalance(row.client_id);
  }

  /** Splits the account's connections again over the databases it has now (best effort: logged). */
  async rebalance(clientId: string): Promise<void> {
    try {
      const live = await this.deps.repo.listLive(clientId);
      const shares = splitConnections(this.deps.limits.connections, live.length);
      await this.deps.tenant.setConnectionLimits(live.map((row, i) => ({ username: row.username, limit: shares[i] })));
    } catch (err) {
      this.deps.logger.warn(`Connection limits of account ${clientId} not rebalanced: ${explain(err)}`);
    }
  }

  /**
   * Roles left at CONNECTION LIMIT 0 by a freeze that never finished (its process died) get their
   * account's share back. Under the database's lock: a freeze still running holds it, and restores
   * the limit itself. Returns how many roles were repaired.
   */
  async repairBlockedLogins(): Promise<number> {
    const { repo, tenant } = this.deps;
    const active = await repo.listByStatus("active");
    const blocked = new Set(await tenant.blockedRoles(active.map((r) => r.username)));
    let repaired = 0;
    for (const row of active.filter((r) => blocked.has(r.username))) {
      await tenant.withDatabaseLock(row.database_name, async () => {
        if (!(await tenant.blockedRoles([row.username])).length) return;
        await this.rebalance(row.client_id);
        repaired++;
        this.deps.logger.warn(`Database ${row.database_name}: logins blocked by an unfinished freeze were restored`);
      });
    }
    return repaired;
  }

  private async step<T>(step: ProvisionStep, reached: Set<ProvisionStep>, work: (attempt: number) => Promise<T>): Promise<T> {
    const result = await retryTransient(async (attempt) => {
      try {
        return await work(attempt);
      } catch (err) {
        if (!neverSent(err)) reached.add(step);
        throw err;
      }
    });
    reached.add(step);
    return result;
  }

  /** With `failedBecause` (a background restore), the record ends `failed` with that reason instead of removed. */
  private async compensate(
    id: string,
    clientId: string,
    names: TenantNames,
    reached: Set<ProvisionStep>,
    cause: unknown,
    failedBecause?: string,
  ): Promise<void> {
    const { tenant, repo, logger } = this.deps;
    try {
      if (reached.has("database") || reached.has("grants") || reached.has("schema") || reached.has("restore")) await tenant.dropDatabase(names.databaseName);
      if (reached.size) await tenant.dropRoles([names.username]);
      await (failedBecause === undefined ? repo.delete(id) : repo.fail(id, failedBecause));
      logger.warn(`Provisioning ${id} failed and was undone: ${explain(cause)}`);
    } catch (err) {
      // The record stays "provisioning" but owned by nobody: it stops counting towards the account,
      // and the reconciler removes what is left once the server answers.
      await repo.abandon(id).catch(() => undefined);
      logger.error(`Provisioning ${id} failed (${explain(cause)}) and could not be undone yet: ${explain(err)}`);
    }
    if (reached.has("role")) await this.rebalance(clientId);
  }
}

/** Destroy could not reach the tenant server before changing anything. */
export class DestroyNotStarted extends Error {
  constructor(readonly reason: unknown) {
    super("Tenant server unreachable before destroy started");
  }
}

function explain(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const unavailable = isUnavailable(err) ? " (server unavailable)" : "";
  return `${typeof e?.code === "string" ? `${e.code} ` : ""}${String(e?.message ?? err)}${unavailable}`;
}
