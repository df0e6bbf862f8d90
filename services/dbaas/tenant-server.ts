/**
 * Everything dbaas does on the tenant server (DBAAS_ADMIN_URL), one method per step: the locks
 * and retries around the SQL of tenant-sql.ts, run over the connections of tenant-connections.ts
 * (pools, slots, transactions); the reads across databases are tenant-reads.ts.
 */
import type { PoolClient } from "pg";
import { isDuplicate, isUnavailable, retryTransient } from "./faults";
import { checkIdentifier, holdRoleOf } from "./naming";
import * as sql from "./tenant-sql";
import { blockJobRoleSql, dropJobRoleSql, releaseJobRoleSql } from "./job-role-sql";
import type { TenantRef } from "./tenant-sql";
import type { CatalogLevel } from "./settings";
import { probeWrongPassword } from "./password-probe";
import type { ProbeOutcome } from "./server-guard";
import type { DatabaseActivity } from "./quota-activity";
import { readActivity } from "./quota-signals";
import { Queryable, TenantConnections } from "./tenant-connections";
import { listMarkedObjects, Measured, measureDatabases } from "./tenant-reads";
import { GuardConfig, guardSql } from "./guard-sql";

export type { TenantRef } from "./tenant-sql";
export type { Measured } from "./tenant-reads";

export type { Queryable } from "./tenant-connections";

const CONNECTIONS_LOCK = "ci-platform:dbaas:connections";

/** Connection figures of the tenant server (tenant-sql.ts CONNECTION_CAPACITY_SQL). */
export type ConnectionCapacity = { max_connections: number; superuser_reserved: number; allotted: number; own: number };

export class TenantServer {
  readonly conn: TenantConnections; // also for the modules that run their own SQL (extensions.ts, pitr.ts)
  private readonly pool: TenantConnections["pool"];

  constructor(
    readonly adminUrl: string,
    opts: { poolSize?: number; createConcurrency?: number; dumpConcurrency?: number } = {},
  ) {
    this.conn = new TenantConnections(adminUrl, opts);
    this.pool = this.conn.pool;
  }

  async close(): Promise<void> {
    await this.conn.close();
  }

  async createRole(ref: TenantRef, verifier: string, connectionLimit: number, marker: string): Promise<void> {
    await this.conn.run(sql.createRoleSql(ref, verifier, connectionLimit, marker));
  }

  /**
   * Lowers the account's other roles to their new shares (`others`), then creates the role with
   * its own once the server has room (`room` decides, given the figures). Limit changes and role
   * creation run one at a time across replicas: two accounts never take the same room, and two
   * ALTER ROLEs never race on one role. Returns the refusal when there is no room.
   */
  async createRoleWithin(
    ref: TenantRef,
    role: { verifier: string; connectionLimit: number; marker: string; tempFileLimitMb?: number; others: Array<{ username: string; limit: number }> },
    room: (capacity: ConnectionCapacity) => string | undefined,
  ): Promise<string | undefined> {
    const statement = sql.createRoleSql(ref, role.verifier, role.connectionLimit, role.marker, role.tempFileLimitMb);
    return this.withConnectionsLock(async (client) => {
      const { rows } = await client.query<ConnectionCapacity>(sql.CONNECTION_CAPACITY_SQL, [role.others.map((o) => o.username)]);
      const refused = room(rows[0]);
      if (refused) return refused;
      if (role.others.length) await this.conn.run(sql.setConnectionLimitsSql(role.others), client);
      await this.conn.run(statement, client);
      return undefined;
    });
  }

  /**
   * The role's new password (a verifier), then every session it has open ended: from here on the
   * old password opens nothing. Under the database's lock, so a destroy or freeze never interleaves.
   */
  async rotatePassword(ref: TenantRef, verifier: string): Promise<void> {
    const statement = sql.setPasswordSql(ref.username, verifier);
    await this.withDatabaseLock(ref.databaseName, async (admin) => {
      await retryTransient(() => this.conn.run(statement, admin));
      await this.terminateSessions(ref.username, admin);
    });
  }

  /** Runs createJobRoleSql (job-role-sql.ts). */
  async createJobRole(statement: string): Promise<void> {
    await this.conn.run(statement);
  }

  /**
   * A GPU job's role gone: no new logins, its sessions ended, then (under its database's lock, as a
   * freeze or destroy; skipped when the database is gone) what it owns there passed to `tenant`.
   */
  async dropJobRole(role: string, tenant: TenantRef): Promise<void> {
    const exists = await this.pool.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [checkIdentifier("job", role)]);
    if (exists.rowCount) {
      await retryTransient(() => this.conn.run(blockJobRoleSql(role)));
      await this.pool.query("SELECT pg_catalog.pg_terminate_backend(pid, 3000) FROM pg_stat_activity WHERE usename = $1", [role]);
      await this.withDatabaseLock(tenant.databaseName, async () => {
        const present = await this.pool.query("SELECT 1 FROM pg_database WHERE datname = $1", [tenant.databaseName]);
        if (present.rowCount) await this.conn.inDatabase(tenant.databaseName, (client) => client.query(releaseJobRoleSql(role, tenant)));
      });
    }
    await retryTransient(() => this.conn.run(dropJobRoleSql(role)));
  }

  /** The role's temporary files per session follow its database's storage quota. */
  async setTempFileLimit(username: string, limitMb: number): Promise<void> {
    await this.conn.run(sql.tempFileLimitSql(username, limitMb));
  }

  /** New connection limits of existing tenant roles (missing ones are skipped). */
  async setConnectionLimits(limits: Array<{ username: string; limit: number }>): Promise<void> {
    if (limits.length) await this.withConnectionsLock((client) => this.conn.run(sql.setConnectionLimitsSql(limits), client));
  }

  private async withConnectionsLock<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.conn.withLock(CONNECTIONS_LOCK, work);
  }

  /** Owned by the admin (the tenant cannot alter it); at most `createConcurrency` at once, across replicas. */
  async createDatabase(ref: TenantRef): Promise<void> {
    const statement = sql.createDatabaseSql(ref);
    await this.conn.withCreateSlot((client) => client.query(statement));
  }

  /**
   * Runs a dump or a restore (pg_dump, pg_restore: heavy on the server's disk and CPU) once one of
   * `dumpConcurrency` slots is free across replicas, as CREATE DATABASE is bounded.
   */
  async withDumpSlot<T>(work: () => Promise<T>): Promise<T> {
    return this.conn.withDumpSlot(work);
  }

  /** Returns the new database's size in bytes. */
  async secureDatabase(ref: TenantRef, marker: string): Promise<number> {
    const results = await this.conn.run(sql.secureDatabaseSql(ref, marker));
    return Number(results[results.length - 1].rows[0].bytes);
  }

  /** Brings the database's catalog to `level` (catalog-sql.ts catalogLevelSql), whatever it was. */
  async setCatalogLevel(databaseName: string, level: CatalogLevel): Promise<void> {
    await this.conn.inDatabase(databaseName, (client) => client.query(sql.catalogLevelSql(level)));
  }

  /** `guard`: the platform's objects in the database (guard-sql.ts); absent: none. */
  async prepareSchema(ref: TenantRef, catalogLevel: CatalogLevel = "off", guard?: GuardConfig): Promise<void> {
    const objects = guard ? `;\n${guardSql(guard)}` : "";
    await this.conn.inDatabase(ref.databaseName, (client) => client.query(sql.prepareSchemaSql(ref, catalogLevel) + objects));
  }

  /**
   * Read-only that the tenant cannot undo (freeze-sql.ts freezeSql), and its sessions ended: a
   * `SET default_transaction_read_only = off` changes nothing of it. While it runs the role takes
   * no new logins (CONNECTION LIMIT 0) and its sessions are ended before every attempt, so a long
   * transaction cannot hold its locks through the retries; the limit is restored after, failure
   * included (a crash in between leaves 0, which Provisioner.repairBlockedLogins undoes).
   */
  async freeze(ref: TenantRef, marker: string, via: Queryable = this.pool): Promise<void> {
    try {
      await this.conn.run(sql.holdRoleSql(ref, marker), via);
    } catch (err) {
      if (!isDuplicate(err)) throw err;
    }
    const { rows } = await via.query<{ limit: number }>("SELECT rolconnlimit AS limit FROM pg_roles WHERE rolname = $1", [
      checkIdentifier("user", ref.username),
    ]);
    const previous = rows[0]?.limit ?? 0;
    await this.conn.run(sql.blockLoginsSql(ref.username), via);
    try {
      const endSessions = () => this.terminateSessions(ref.username, via, true);
      try {
        await this.conn.inDatabase(ref.databaseName, (client) => this.conn.lockedTransaction(client, sql.freezeSql(ref), endSessions));
      } catch (err) {
        if (isUnavailable(err)) throw err;
        // A freeze that cannot be completed (or verified) must still stop the writes.
        await this.conn.run(sql.lockOutSql(ref), via);
        await endSessions();
        throw new Error(`Freeze of ${ref.databaseName} failed (${(err as Error).message}): its tenant is locked out until it is back under quota`, {
          cause: err,
        });
      }
      // Sessions that were still being ended when the rights changed.
      await endSessions();
    } finally {
      // 0 before: left by a crashed freeze; the account's share comes back through repairBlockedLogins.
      if (previous !== 0) await this.conn.run(sql.restoreLoginsSql(ref.username, previous), via);
    }
  }

  /** How the tenant of a frozen database could still write there (freeze-sql.ts frozenWritePathsSql); null: nowhere. */
  async frozenWritePaths(ref: TenantRef): Promise<string | null> {
    const statement = sql.frozenWritePathsSql(ref);
    return this.conn.inDatabase(ref.databaseName, async (client) => (await client.query<{ ways: string | null }>(statement)).rows[0].ways);
  }

  /** Which of these tenant roles take no logins (CONNECTION LIMIT 0: a freeze running, or one that crashed). */
  async blockedRoles(usernames: string[]): Promise<string[]> {
    const { rows } = await this.pool.query<{ rolname: string }>("SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[]) AND rolconnlimit = 0", [
      usernames.map((u) => checkIdentifier("user", u)),
    ]);
    return rows.map((r) => r.rolname);
  }

  async thaw(ref: TenantRef, via: Queryable = this.pool): Promise<void> {
    const { rows } = await via.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [holdRoleOf(ref.username)]);
    await this.conn.inDatabase(ref.databaseName, (client) => this.conn.lockedTransaction(client, sql.thawSql(ref, rows.length > 0)));
  }

  /** Ends open sessions and drops the database; nothing if it is already gone. */
  async dropDatabase(databaseName: string, via: Queryable = this.pool): Promise<void> {
    const statement = sql.dropDatabaseSql(databaseName);
    await retryTransient(() => this.conn.run(statement, via));
  }

  /** Drops tenant and hold roles (after their database); nothing for those already gone. */
  async dropRoles(names: string[], via: Queryable = this.pool): Promise<void> {
    if (!names.length) return;
    const statement = sql.dropRolesSql(names);
    await retryTransient(() => this.conn.run(statement, via));
  }

  /**
   * Size in bytes and whether the tenant may write (freeze revokes CREATE on the database in the
   * same transaction as everything else, so that right tells the state the server is really in).
   * Databases or roles that do not exist are absent from the map.
   */
  async measure(refs: TenantRef[]): Promise<Map<string, Measured>> {
    return measureDatabases(this.pool, refs);
  }

  /** Every named database's write activity in one query (quota-signals.ts). */
  async activity(databaseNames: string[], minAgeS: number): Promise<Map<string, DatabaseActivity>> {
    return readActivity(this.pool, databaseNames, minAgeS);
  }

  /** Whether the tenant currently has its write rights (see measure). */
  async isWritable(ref: TenantRef, via: Queryable = this.pool): Promise<boolean> {
    const { rows } = await via.query<{ writable: boolean }>("SELECT pg_catalog.has_database_privilege($1, $2, 'CREATE') AS writable", [
      checkIdentifier("user", ref.username),
      checkIdentifier("database", ref.databaseName),
    ]);
    return rows[0].writable;
  }

  /** Databases and roles carrying `marker`, i.e. created by the platform instance that owns it. */
  async listMarked(marker: string): Promise<{ databases: string[]; roles: string[] }> {
    return listMarkedObjects(this.pool, marker);
  }

  /**
   * Serialises freeze, thaw and destroy of one database across replicas. `work` gets the
   * connection holding the lock for its admin statements, so it never waits for a second one.
   */
  async withDatabaseLock<T>(databaseName: string, work: (admin: Queryable) => Promise<T>): Promise<T> {
    const key = `ci-platform:dbaas:db:${checkIdentifier("database", databaseName)}`;
    return this.conn.withLock(key, work);
  }

  async hardenServer(): Promise<void> {
    await this.pool.query(sql.HARDEN_SQL);
  }

  /** Whether the server accepts TLS connections (ssl = on). */
  async hasTls(): Promise<boolean> {
    const { rows } = await this.pool.query<{ ssl: string }>("SELECT pg_catalog.current_setting('ssl') AS ssl");
    return rows[0].ssl === "on";
  }

  /** The server's major version (15 for 15.4). */
  async serverMajor(): Promise<number> {
    const { rows } = await this.pool.query<{ v: string }>("SELECT pg_catalog.current_setting('server_version_num') AS v");
    return Math.floor(Number(rows[0].v) / 10000);
  }

  /** Identifies the cluster (the same for every database of one server, and its replicas). */
  async systemId(): Promise<string> {
    const { rows } = await this.pool.query<{ id: string }>("SELECT system_identifier::text AS id FROM pg_catalog.pg_control_system()");
    return rows[0].id;
  }

  /** See password-probe.ts. */
  async probeWrongPassword(): Promise<ProbeOutcome> {
    return probeWrongPassword(this.adminUrl, this.pool);
  }

  /**
   * Waits (up to 3 s each) until the sessions are gone, so their locks are free when this returns.
   * `withJobs`: also those of GPU jobs' roles (members of this one, job-role-sql.ts), which act as it.
   */
  private async terminateSessions(username: string, via: Queryable, withJobs = false): Promise<void> {
    const jobs = withJobs
      ? " OR usesysid IN (SELECT m.member FROM pg_catalog.pg_auth_members m JOIN pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid WHERE r.rolname = $1)"
      : "";
    await via.query(
      `SELECT pg_catalog.pg_terminate_backend(pid, 3000) FROM pg_stat_activity WHERE (usename = $1${jobs}) AND pid <> pg_catalog.pg_backend_pid()`,
      [checkIdentifier("user", username)],
    );
  }
}
