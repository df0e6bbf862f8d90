/**
 * Everything dbaas does on the tenant server (DBAAS_ADMIN_URL), one method per step: the
 * connections, locks, transactions and retries around the SQL of tenant-sql.ts.
 */
import { Client, Pool, PoolClient } from "pg";
import { isDuplicate, isUnavailable, retryTransient } from "./faults";
import { checkIdentifier, holdRoleOf, kindOf } from "./naming";
import * as sql from "./tenant-sql";
import type { TenantRef } from "./tenant-sql";
import type { CatalogLevel } from "./settings";
import { probeWrongPassword } from "./password-probe";
import type { ProbeOutcome } from "./server-guard";
import type { DatabaseActivity } from "./quota-activity";
import { readActivity } from "./quota-signals";
import { newPool } from "../../lib/db";
import { pinnedConnection } from "./search-path";

export type { TenantRef } from "./tenant-sql";
export type Measured = { bytes: number; writable: boolean };

/** The pool, or one connection of it (the one holding a lock, so work under it needs no second). */
export type Queryable = { query: Pool["query"] };

const CREATE_LOCK = "ci-platform:dbaas:create";
const CONNECTIONS_LOCK = "ci-platform:dbaas:connections";
const DUMP_LOCK = "ci-platform:dbaas:dump";

/** Connection figures of the tenant server (tenant-sql.ts CONNECTION_CAPACITY_SQL). */
export type ConnectionCapacity = { max_connections: number; superuser_reserved: number; allotted: number; own: number };

export class TenantServer {
  private readonly pool: Pool;
  /** CREATE DATABASE runs on its own pool: waiting for a turn then holds no connection others need. */
  private readonly createPool: Pool;
  private readonly createSlots: number;
  /** Holds the dump slots' locks only (the tools connect by themselves). */
  private readonly dumpPool: Pool;
  private readonly dumpSlots: number;

  constructor(
    readonly adminUrl: string,
    opts: { poolSize?: number; createConcurrency?: number; dumpConcurrency?: number } = {},
  ) {
    this.createSlots = Math.max(1, opts.createConcurrency ?? 2);
    this.dumpSlots = Math.max(1, opts.dumpConcurrency ?? 2);
    const pool = (max: number) => newPool({ ...pinnedConnection(adminUrl), max, connectionTimeoutMillis: 10_000, idleTimeoutMillis: 30_000 });
    this.pool = pool(opts.poolSize ?? 10);
    this.createPool = pool(this.createSlots);
    this.dumpPool = pool(this.dumpSlots);
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end(), this.createPool.end(), this.dumpPool.end()]);
  }

  async createRole(ref: TenantRef, verifier: string, connectionLimit: number, marker: string): Promise<void> {
    await this.run(sql.createRoleSql(ref, verifier, connectionLimit, marker));
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
      if (role.others.length) await this.run(sql.setConnectionLimitsSql(role.others), client);
      await this.run(statement, client);
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
      await retryTransient(() => this.run(statement, admin));
      await this.terminateSessions(ref.username, admin);
    });
  }

  /** The role's temporary files per session follow its database's storage quota. */
  async setTempFileLimit(username: string, limitMb: number): Promise<void> {
    await this.run(sql.tempFileLimitSql(username, limitMb));
  }

  /** New connection limits of existing tenant roles (missing ones are skipped). */
  async setConnectionLimits(limits: Array<{ username: string; limit: number }>): Promise<void> {
    if (limits.length) await this.withConnectionsLock((client) => this.run(sql.setConnectionLimitsSql(limits), client));
  }

  private async withConnectionsLock<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(this.pool, async (client) => {
      await client.query("SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1))", [CONNECTIONS_LOCK]);
      try {
        return await work(client);
      } finally {
        await client.query("SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1))", [CONNECTIONS_LOCK]);
      }
    });
  }

  /** Owned by the admin (the tenant cannot alter it); at most `createConcurrency` at once, across replicas. */
  async createDatabase(ref: TenantRef): Promise<void> {
    const statement = sql.createDatabaseSql(ref);
    await this.withSlot(this.createPool, CREATE_LOCK, this.createSlots, (client) => client.query(statement));
  }

  /**
   * Runs a dump or a restore (pg_dump, pg_restore: heavy on the server's disk and CPU) once one of
   * `dumpConcurrency` slots is free across replicas, as CREATE DATABASE is bounded.
   */
  async withDumpSlot<T>(work: () => Promise<T>): Promise<T> {
    return this.withSlot(this.dumpPool, DUMP_LOCK, this.dumpSlots, () => work());
  }

  /** One of `slots` advisory locks named `lock`, held on a connection of `pool` while `work` runs. */
  private async withSlot<T>(pool: Pool, lock: string, slots: number, work: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(pool, async (client) => {
      const free = await client.query<{ slot: number }>(
        "SELECT s AS slot FROM pg_catalog.generate_series(0, $2::int - 1) s WHERE pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext($1), s) LIMIT 1",
        [lock, slots],
      );
      let slot = free.rows[0]?.slot;
      if (slot === undefined) {
        slot = Math.floor(Math.random() * slots);
        await client.query("SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1), $2)", [lock, slot]);
      }
      try {
        return await work(client);
      } finally {
        await client.query("SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1), $2)", [lock, slot]);
      }
    });
  }

  /** Returns the new database's size in bytes. */
  async secureDatabase(ref: TenantRef, marker: string): Promise<number> {
    const results = await this.run(sql.secureDatabaseSql(ref, marker));
    return Number(results[results.length - 1].rows[0].bytes);
  }

  /** Brings the database's catalog to `level` (tenant-sql.ts catalogLevelSql), whatever it was. */
  async setCatalogLevel(databaseName: string, level: CatalogLevel): Promise<void> {
    await this.inDatabase(databaseName, (client) => client.query(sql.catalogLevelSql(level)));
  }

  async prepareSchema(ref: TenantRef, catalogLevel: CatalogLevel = "off"): Promise<void> {
    await this.inDatabase(ref.databaseName, (client) => client.query(sql.prepareSchemaSql(ref, catalogLevel)));
  }

  /**
   * Read-only that the tenant cannot undo (tenant-sql.ts freezeSql), and its sessions ended: a
   * `SET default_transaction_read_only = off` changes nothing of it. While it runs the role takes
   * no new logins (CONNECTION LIMIT 0) and its sessions are ended before every attempt, so a long
   * transaction cannot hold its locks through the retries; the limit is restored after, failure
   * included (a crash in between leaves 0, which Provisioner.repairBlockedLogins undoes).
   */
  async freeze(ref: TenantRef, marker: string, via: Queryable = this.pool): Promise<void> {
    try {
      await this.run(sql.holdRoleSql(ref, marker), via);
    } catch (err) {
      if (!isDuplicate(err)) throw err;
    }
    const { rows } = await via.query<{ limit: number }>("SELECT rolconnlimit AS limit FROM pg_roles WHERE rolname = $1", [
      checkIdentifier("user", ref.username),
    ]);
    const previous = rows[0]?.limit ?? 0;
    await this.run(sql.blockLoginsSql(ref.username), via);
    try {
      const endSessions = () => this.terminateSessions(ref.username, via);
      try {
        await this.inDatabase(ref.databaseName, (client) => this.lockedTransaction(client, sql.freezeSql(ref), endSessions));
      } catch (err) {
        if (isUnavailable(err)) throw err;
        // A freeze that cannot be completed (or verified) must still stop the writes.
        await this.run(sql.lockOutSql(ref), via);
        await endSessions();
        throw new Error(`Freeze of ${ref.databaseName} failed (${(err as Error).message}): its tenant is locked out until it is back under quota`, {
          cause: err,
        });
      }
      // Sessions that were still being ended when the rights changed.
      await endSessions();
    } finally {
      // 0 before: left by a crashed freeze; the account's share comes back through repairBlockedLogins.
      if (previous !== 0) await this.run(sql.restoreLoginsSql(ref.username, previous), via);
    }
  }

  /** How the tenant of a frozen database could still write there (tenant-sql.ts frozenWritePathsSql); null: nowhere. */
  async frozenWritePaths(ref: TenantRef): Promise<string | null> {
    const statement = sql.frozenWritePathsSql(ref);
    return this.inDatabase(ref.databaseName, async (client) => (await client.query<{ ways: string | null }>(statement)).rows[0].ways);
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
    await this.inDatabase(ref.databaseName, (client) => this.lockedTransaction(client, sql.thawSql(ref, rows.length > 0)));
  }

  /** Ends open sessions and drops the database; nothing if it is already gone. */
  async dropDatabase(databaseName: string, via: Queryable = this.pool): Promise<void> {
    const statement = sql.dropDatabaseSql(databaseName);
    await retryTransient(() => this.run(statement, via));
  }

  /** Drops tenant and hold roles (after their database); nothing for those already gone. */
  async dropRoles(names: string[], via: Queryable = this.pool): Promise<void> {
    if (!names.length) return;
    const statement = sql.dropRolesSql(names);
    await retryTransient(() => this.run(statement, via));
  }

  /**
   * Size in bytes and whether the tenant may write (freeze revokes CREATE on the database in the
   * same transaction as everything else, so that right tells the state the server is really in).
   * Databases or roles that do not exist are absent from the map.
   */
  async measure(refs: TenantRef[]): Promise<Map<string, Measured>> {
    const measured = new Map<string, Measured>();
    refs.forEach((r) => (checkIdentifier("database", r.databaseName), checkIdentifier("user", r.username)));
    const query = `SELECT d.datname, pg_catalog.pg_database_size(d.oid) AS bytes, pg_catalog.has_database_privilege(r.oid, d.oid, 'CREATE') AS writable
                     FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS t(datname, username)
                     JOIN pg_database d ON d.datname = t.datname
                     JOIN pg_roles r ON r.rolname = t.username`;
    const collect = async (batch: TenantRef[]) => {
      const { rows } = await this.pool.query<{ datname: string; bytes: string; writable: boolean }>(query, [
        batch.map((r) => r.databaseName),
        batch.map((r) => r.username),
      ]);
      for (const row of rows) measured.set(row.datname, { bytes: Number(row.bytes), writable: row.writable });
    };
    if (!refs.length) return measured;
    try {
      await collect(refs);
    } catch (err) {
      if (isUnavailable(err)) throw err;
      // A database dropped while this ran makes pg_database_size fail: measure one by one.
      for (const ref of refs) await collect([ref]).catch(() => undefined);
    }
    return measured;
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
    const { rows } = await this.pool.query<{ kind: "database" | "role"; name: string }>(
      `SELECT 'database' AS kind, d.datname AS name FROM pg_database d
         JOIN pg_shdescription s ON s.objoid = d.oid AND s.classoid = 'pg_database'::regclass
        WHERE s.description = $1
       UNION ALL
       SELECT 'role', r.rolname FROM pg_roles r
         JOIN pg_shdescription s ON s.objoid = r.oid AND s.classoid = 'pg_authid'::regclass
        WHERE s.description = $1`,
      [sql.checkMarker(marker)],
    );
    return {
      databases: rows.filter((r) => r.kind === "database" && kindOf(r.name) === "database").map((r) => r.name),
      roles: rows.filter((r) => r.kind === "role" && (kindOf(r.name) === "user" || kindOf(r.name) === "hold")).map((r) => r.name),
    };
  }

  /**
   * Serialises freeze, thaw and destroy of one database across replicas. `work` gets the
   * connection holding the lock for its admin statements, so it never waits for a second one.
   */
  async withDatabaseLock<T>(databaseName: string, work: (admin: Queryable) => Promise<T>): Promise<T> {
    const key = `ci-platform:dbaas:db:${checkIdentifier("database", databaseName)}`;
    return this.withClient(this.pool, async (client) => {
      await client.query("SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1))", [key]);
      try {
        return await work(client);
      } finally {
        await client.query("SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1))", [key]);
      }
    });
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

  /** Waits (up to 3 s each) until the sessions are gone, so their locks are free when this returns. */
  private async terminateSessions(username: string, via: Queryable): Promise<void> {
    await via.query("SELECT pg_catalog.pg_terminate_backend(pid, 3000) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_catalog.pg_backend_pid()", [
      checkIdentifier("user", username),
    ]);
  }

  /** One transaction that gives up quickly (and is retried, `before` run ahead of each attempt) when a tenant session holds a lock. */
  private async lockedTransaction(client: Client, statements: string, before?: () => Promise<void>): Promise<void> {
    await retryTransient(async () => {
      await before?.();
      await client.query("BEGIN");
      try {
        await client.query("SET LOCAL lock_timeout = '3s'");
        await client.query(statements);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw err;
      }
    });
  }

  /** A simple-protocol query (several statements, one implicit transaction); always an array of results. */
  private async run(statements: string, via: Queryable = this.pool): Promise<Array<{ rows: Array<Record<string, unknown>> }>> {
    const result = (await via.query(statements)) as unknown;
    return Array.isArray(result) ? result : [result as { rows: Array<Record<string, unknown>> }];
  }

  private async withClient<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    let failed: Error | undefined;
    try {
      return await work(client);
    } catch (err) {
      failed = err as Error;
      throw err;
    } finally {
      // It may have lost its socket, or still hold a lock whose release failed: never reuse it then.
      client.release(failed);
    }
  }

  private async inDatabase<T>(databaseName: string, work: (client: Client) => Promise<T>): Promise<T> {
    const url = new URL(this.adminUrl);
    url.pathname = `/${checkIdentifier("database", databaseName)}`;
    const client = new Client({ ...pinnedConnection(url.toString()), connectionTimeoutMillis: 10_000 });
    client.on("error", () => undefined);
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
