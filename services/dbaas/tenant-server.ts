/**
 * Everything dbaas does on the tenant server (DBAAS_ADMIN_URL), one method per step. Identifiers
 * are generated (naming.ts), pattern-checked and quoted; the only literals inlined are the
 * pattern-checked marker and SCRAM verifier (utility statements take no bind parameters).
 */
import { Client, Pool, PoolClient } from "pg";
import { VERIFIER_PATTERN } from "./credentials";
import { isDuplicate, isUnavailable, retryTransient } from "./faults";
import { checkIdentifier, holdRoleOf, ident, kindOf } from "./naming";

export type TenantRef = { databaseName: string; username: string };

/** The pool, or one connection of it (the one holding a lock, so work under it needs no second). */
export type Queryable = { query: Pool["query"] };

const MARKER_PATTERN = /^ci-platform:dbaas:[0-9a-f-]{36}$/;
const CREATE_LOCK = "ci-platform:dbaas:create";
// Large objects can be created by any role unless these are revoked; a read-only tenant must not.
const LO_CREATORS = "pg_catalog.lo_creat(integer), pg_catalog.lo_create(oid), pg_catalog.lo_from_bytea(oid, bytea)";

const literal = (text: string) => `'${text}'`; // only for the pattern-checked names, marker and verifier

function checkMarker(marker: string): string {
  if (!MARKER_PATTERN.test(marker)) throw new Error(`Invalid instance marker ${JSON.stringify(marker)}`);
  return marker;
}

export class TenantServer {
  private readonly pool: Pool;
  /** CREATE DATABASE runs on its own pool: waiting for a turn then holds no connection others need. */
  private readonly createPool: Pool;
  private readonly createSlots: number;

  constructor(
    private readonly adminUrl: string,
    opts: { poolSize?: number; createConcurrency?: number } = {},
  ) {
    this.createSlots = Math.max(1, opts.createConcurrency ?? 2);
    const pool = (max: number) => {
      const p = new Pool({ connectionString: adminUrl, max, connectionTimeoutMillis: 10_000, idleTimeoutMillis: 30_000 });
      // An idle connection losing its server must not crash the process; the next query reconnects.
      p.on("error", () => undefined);
      return p;
    };
    this.pool = pool(opts.poolSize ?? 10);
    this.createPool = pool(this.createSlots);
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end(), this.createPool.end()]);
  }

  /** LOGIN and nothing more, a connection limit, the password as a verifier, and our marker. */
  async createRole(ref: TenantRef, verifier: string, connectionLimit: number, marker: string): Promise<void> {
    if (!VERIFIER_PATTERN.test(verifier)) throw new Error("Refusing a password that is not a SCRAM verifier");
    if (!Number.isInteger(connectionLimit) || connectionLimit < 1) throw new Error(`Invalid connection limit ${connectionLimit}`);
    const user = ident("user", ref.username);
    await this.run(
      `CREATE ROLE ${user} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS ` +
        `CONNECTION LIMIT ${connectionLimit} PASSWORD ${literal(verifier)};
       COMMENT ON ROLE ${user} IS ${literal(checkMarker(marker))}`,
    );
  }

  /**
   * From template0 (nobody can be connected to it, unlike template1), owned by the admin so the
   * tenant cannot alter it; at most `createConcurrency` at once on the server, across replicas.
   */
  async createDatabase(ref: TenantRef): Promise<void> {
    const db = ident("database", ref.databaseName);
    const slots = this.createSlots;
    await this.withClient(this.createPool, async (client) => {
      const free = await client.query<{ slot: number }>(
        "SELECT s AS slot FROM generate_series(0, $2::int - 1) s WHERE pg_try_advisory_lock(hashtext($1), s) LIMIT 1",
        [CREATE_LOCK, slots],
      );
      let slot = free.rows[0]?.slot;
      if (slot === undefined) {
        slot = Math.floor(Math.random() * slots);
        await client.query("SELECT pg_advisory_lock(hashtext($1), $2)", [CREATE_LOCK, slot]);
      }
      try {
        await client.query(`CREATE DATABASE ${db} TEMPLATE template0`);
      } finally {
        await client.query("SELECT pg_advisory_unlock(hashtext($1), $2)", [CREATE_LOCK, slot]);
      }
    });
  }

  /** Marks the database, closes it to PUBLIC and opens it to its tenant; returns its size in bytes. */
  async secureDatabase(ref: TenantRef, marker: string): Promise<number> {
    const db = ident("database", ref.databaseName);
    const user = ident("user", ref.username);
    const results = await this.run(
      `COMMENT ON DATABASE ${db} IS ${literal(checkMarker(marker))};
       REVOKE CONNECT, TEMPORARY ON DATABASE ${db} FROM PUBLIC;
       GRANT CONNECT, TEMPORARY, CREATE ON DATABASE ${db} TO ${user};
       SELECT pg_database_size(${literal(ref.databaseName)}) AS bytes`,
    );
    return Number(results[results.length - 1].rows[0].bytes);
  }

  /** Inside the new database: only the tenant may use (and create in) schema public. */
  async prepareSchema(ref: TenantRef): Promise<void> {
    const user = ident("user", ref.username);
    await this.inDatabase(ref.databaseName, (client) =>
      client.query(
        `REVOKE ALL ON SCHEMA public FROM PUBLIC;
         GRANT USAGE, CREATE ON SCHEMA public TO ${user};
         REVOKE EXECUTE ON FUNCTION ${LO_CREATORS} FROM PUBLIC;
         GRANT EXECUTE ON FUNCTION ${LO_CREATORS} TO ${user}`,
      ),
    );
  }

  /**
   * Read-only that the tenant cannot undo: everything it owns passes to its NOLOGIN hold role, so
   * it keeps SELECT (and TRUNCATE, to free space, unless a TRUNCATE trigger would run as the
   * owner), loses every write and create right and the EXECUTE of SECURITY DEFINER routines, and
   * its sessions end. A `SET default_transaction_read_only = off` changes nothing of that.
   */
  async freeze(ref: TenantRef, marker: string, via: Queryable = this.pool): Promise<void> {
    const user = ident("user", ref.username);
    const db = ident("database", ref.databaseName);
    const hold = holdRoleOf(ref.username);
    await this.ensureHoldRole(hold, marker, via);
    await this.terminateSessions(ref.username, via);
    const holdLit = literal(hold);
    await this.inDatabase(ref.databaseName, (client) =>
      this.lockedTransaction(
        client,
        `REASSIGN OWNED BY ${user} TO ${ident("hold", hold)};
         REVOKE CREATE ON SCHEMA public FROM ${user};
         REVOKE CREATE, TEMPORARY ON DATABASE ${db} FROM ${user};
         REVOKE EXECUTE ON FUNCTION ${LO_CREATORS} FROM ${user};
         DO $freeze$
         DECLARE r record;
         BEGIN
           FOR r IN SELECT nspname FROM pg_namespace WHERE nspowner = ${holdLit}::regrole OR nspname = 'public' LOOP
             EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', r.nspname, ${literal(ref.username)});
           END LOOP;
           FOR r IN SELECT oid::regclass AS rel FROM pg_class WHERE relowner = ${holdLit}::regrole AND relkind IN ('r', 'p', 'v', 'm', 'S') LOOP
             EXECUTE format('GRANT SELECT ON %s TO %I', r.rel, ${literal(ref.username)});
           END LOOP;
           IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE NOT tgisinternal AND (tgtype & 32) <> 0) THEN
             FOR r IN SELECT oid::regclass AS rel FROM pg_class WHERE relowner = ${holdLit}::regrole AND relkind IN ('r', 'p') LOOP
               EXECUTE format('GRANT TRUNCATE ON %s TO %I', r.rel, ${literal(ref.username)});
             END LOOP;
           END IF;
           FOR r IN SELECT oid::regprocedure AS fn FROM pg_proc WHERE proowner = ${holdLit}::regrole AND prosecdef LOOP
             EXECUTE format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC, %I', r.fn, ${literal(ref.username)});
           END LOOP;
         END
         $freeze$`,
      ),
    );
    // Sessions that connected while the rights were changing.
    await this.terminateSessions(ref.username, via);
  }

  /** Gives everything back to the tenant, with its create rights. */
  async thaw(ref: TenantRef, via: Queryable = this.pool): Promise<void> {
    const user = ident("user", ref.username);
    const db = ident("database", ref.databaseName);
    const hold = holdRoleOf(ref.username);
    const reassign = (await this.roleExists(hold, via)) ? `REASSIGN OWNED BY ${ident("hold", hold)} TO ${user};` : "";
    await this.inDatabase(ref.databaseName, (client) =>
      this.lockedTransaction(
        client,
        `${reassign}
         GRANT USAGE, CREATE ON SCHEMA public TO ${user};
         GRANT CONNECT, TEMPORARY, CREATE ON DATABASE ${db} TO ${user};
         GRANT EXECUTE ON FUNCTION ${LO_CREATORS} TO ${user}`,
      ),
    );
  }

  /** Ends open sessions and drops the database; nothing if it is already gone. */
  async dropDatabase(databaseName: string, via: Queryable = this.pool): Promise<void> {
    const db = ident("database", databaseName);
    await retryTransient(() => this.run(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`, via));
  }

  /** Drops tenant and hold roles (after their database); nothing for those already gone. */
  async dropRoles(names: string[], via: Queryable = this.pool): Promise<void> {
    if (!names.length) return;
    const quoted = names.map((name) => {
      const kind = kindOf(name);
      if (kind !== "user" && kind !== "hold") throw new Error(`Refusing to drop role ${JSON.stringify(name)}`);
      return ident(kind, name);
    });
    await retryTransient(() => this.run(`DROP ROLE IF EXISTS ${quoted.join(", ")}`, via));
  }

  /** Sizes in bytes, by database name; databases that do not exist are absent. */
  async databaseSizes(names: string[]): Promise<Map<string, number>> {
    names.forEach((name) => checkIdentifier("database", name));
    const sizes = new Map<string, number>();
    if (!names.length) return sizes;
    const sql = "SELECT datname, pg_database_size(oid) AS bytes FROM pg_database WHERE datname = ANY($1::text[])";
    try {
      const { rows } = await this.pool.query<{ datname: string; bytes: string }>(sql, [names]);
      for (const row of rows) sizes.set(row.datname, Number(row.bytes));
    } catch (err) {
      if (isUnavailable(err)) throw err;
      // A database dropped while this ran makes pg_database_size fail: measure one by one.
      for (const name of names) {
        const one = await this.pool.query<{ datname: string; bytes: string }>(sql, [[name]]).catch(() => undefined);
        for (const row of one?.rows ?? []) sizes.set(row.datname, Number(row.bytes));
      }
    }
    return sizes;
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
      [checkMarker(marker)],
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
      await client.query("SELECT pg_advisory_lock(hashtext($1))", [key]);
      try {
        return await work(client);
      } finally {
        await client.query("SELECT pg_advisory_unlock(hashtext($1))", [key]);
      }
    });
  }

  /**
   * PUBLIC may connect to `postgres` and `template1` out of the box: a tenant could then hold
   * template1 (breaking CREATE DATABASE from it) or fill temporary tables outside its quota.
   * Superusers and explicit grants keep their access.
   */
  async hardenServer(): Promise<void> {
    await this.pool.query(
      `DO $harden$
       DECLARE d text;
       BEGIN
         FOR d IN SELECT datname FROM pg_database WHERE datname IN ('postgres', 'template1') LOOP
           EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', d);
         END LOOP;
       END
       $harden$`,
    );
  }

  private async ensureHoldRole(hold: string, marker: string, via: Queryable): Promise<void> {
    const role = ident("hold", hold);
    try {
      await this.run(`CREATE ROLE ${role} NOLOGIN NOINHERIT; COMMENT ON ROLE ${role} IS ${literal(checkMarker(marker))}`, via);
    } catch (err) {
      if (!isDuplicate(err)) throw err;
    }
  }

  private async roleExists(name: string, via: Queryable): Promise<boolean> {
    const { rows } = await via.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [name]);
    return rows.length > 0;
  }

  private async terminateSessions(username: string, via: Queryable): Promise<void> {
    await via.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()", [
      checkIdentifier("user", username),
    ]);
  }

  /** One transaction that gives up quickly (and is retried) when a tenant session holds a lock. */
  private async lockedTransaction(client: Client, sql: string): Promise<void> {
    await retryTransient(async () => {
      await client.query("BEGIN");
      try {
        await client.query("SET LOCAL lock_timeout = '3s'");
        await client.query(sql);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw err;
      }
    });
  }

  /** A simple-protocol query (several statements, one implicit transaction); always an array of results. */
  private async run(sql: string, via: Queryable = this.pool): Promise<Array<{ rows: any[] }>> {
    const result = (await via.query(sql)) as unknown;
    return Array.isArray(result) ? result : [result as { rows: any[] }];
  }

  private async withClient<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      return await work(client);
    } catch (err) {
      broken = err as Error;
      throw err;
    } finally {
      // A failed statement may leave a lock or a broken socket behind: never hand this one out again.
      client.release(broken ?? false);
    }
  }

  private async inDatabase<T>(databaseName: string, work: (client: Client) => Promise<T>): Promise<T> {
    const url = new URL(this.adminUrl);
    url.pathname = `/${checkIdentifier("database", databaseName)}`;
    const client = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 10_000 });
    client.on("error", () => undefined);
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
