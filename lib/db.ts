/**
 * PostgreSQL access shared by every service: one pool per (process, URL), the platform
 * database created when missing, and versioned per-schema migrations that are safe when
 * several replicas start at once (an advisory lock serialises them).
 */
import { createHash } from "crypto";
import { Pool, PoolClient, PoolConfig, Client, escapeLiteral, type QueryResultRow } from "pg";

export type Migration = { version: number; name: string; sql: string };

const pools = new Map<string, { pool: Pool; users: number }>();

/**
 * A pool whose idle clients may lose their server (a restart, pg_terminate_backend, DROP DATABASE
 * … WITH (FORCE)) without crashing the process: pg-pool re-emits such an error on the pool, where
 * no listener means an uncaught exception; the next query simply opens a new connection.
 */
export function newPool(config: PoolConfig): Pool {
  const pool = new Pool(config);
  pool.on("error", () => undefined);
  return pool;
}

export function acquirePool(url: string, max = 10): Pool {
  const entry = pools.get(url);
  if (entry) {
    entry.users += 1;
    return entry.pool;
  }
  const pool = newPool({ connectionString: url, max, idleTimeoutMillis: 30_000 });
  pools.set(url, { pool, users: 1 });
  return pool;
}

export async function releasePool(url: string): Promise<void> {
  const entry = pools.get(url);
  if (!entry) return;
  entry.users -= 1;
  if (entry.users > 0) return;
  pools.delete(url);
  await entry.pool.end();
}

const DUPLICATE_DATABASE = "42P04";
const UNIQUE_VIOLATION = "23505";

/** Creates the database named in `url` if it does not exist (connects to `postgres` to do so). */
export async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ""));
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) throw new Error(`Unsupported database name "${name}"`);
  const probe = new Client({ connectionString: url });
  try {
    await probe.connect();
    await closeToPublic(probe);
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== "3D000") throw err; // 3D000: database does not exist
  } finally {
    await probe.end().catch(() => undefined);
  }
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    // template0: nobody connects to it, so a session held on template1 cannot block us (55006).
    await client.query(`CREATE DATABASE "${name}" TEMPLATE template0`);
  } catch (err) {
    const code = (err as { code?: string }).code;
    // Another replica created it first.
    if (code !== DUPLICATE_DATABASE && code !== UNIQUE_VIOLATION) throw err;
  } finally {
    await client.end();
  }
  const created = new Client({ connectionString: url });
  await created.connect();
  try {
    await closeToPublic(created);
  } finally {
    await created.end().catch(() => undefined);
  }
}

/**
 * The platform's state is for its own roles: PUBLIC (any role on that server, a tenant's say)
 * may not connect to it. Only when needed, and one at a time: concurrent REVOKEs on one database fail.
 */
async function closeToPublic(client: Client): Promise<void> {
  await client.query(`DO $close$ BEGIN
      -- Services of one process start together: one REVOKE at a time, each checking after the lock.
      PERFORM pg_advisory_xact_lock(hashtext('ci-platform:close-to-public'));
      IF has_database_privilege('public', current_database(), 'CONNECT') OR has_database_privilege('public', current_database(), 'TEMPORARY') THEN
        EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
      END IF;
    END $close$`);
}

/** Applies the pending migrations of `schema`, in version order, each in its own transaction. */
export async function migrate(pool: Pool, schema: string, migrations: Migration[]): Promise<number[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`Invalid schema name "${schema}"`);
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query("SELECT pg_advisory_lock(hashtext($1))", [`ci-platform:migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set((await client.query<{ version: number }>(`SELECT version FROM ${schema}.schema_migrations`)).rows.map((r) => r.version));
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      await inTransaction(client, async () => {
        await client.query(`SET LOCAL search_path TO ${schema}`);
        await client.query(m.sql);
        await client.query(`INSERT INTO ${schema}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      });
      applied.push(m.version);
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock(hashtext($1))", [`ci-platform:migrate:${schema}`]).catch(() => undefined);
    client.release();
  }
  return applied;
}

export async function inTransaction<T>(client: PoolClient, work: () => Promise<T>): Promise<T> {
  await client.query("BEGIN");
  try {
    const result = await work();
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  }
}

/** Runs `work` in a transaction on a pooled client. */
export async function transaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await inTransaction(client, () => work(client));
  } finally {
    client.release();
  }
}

/** A client's server connection (the same object however the client is wrapped), or the client itself. */
const connectionOf = (client: PoolClient): object => (client as unknown as { connection?: object }).connection ?? client;

/** Per statement name, the connections that hold it (ConnectionStatement): SQL's PREPARE lasts as long as its connection. */
const preparedOn = new Map<string, WeakSet<object>>();

/**
 * A statement prepared with SQL's PREPARE on each connection that runs it (in front of its first
 * EXECUTE there) and run with EXECUTE inside a multi-statement query: one round trip, in a
 * transaction whose planner settings (SET LOCAL) hold whenever PostgreSQL plans it — also for the
 * plan it keeps for any values (generic), which it makes once and keeps: a generic plan made while
 * a table was small would otherwise go on reading it whole as it grows, until the next ANALYZE.
 */
export class ConnectionStatement {
  readonly name: string;
  private readonly holders: WeakSet<object>;

  /** `types`: its parameters' ($1, $2, …) types; `text`: the statement. */
  constructor(
    private readonly types: string[],
    readonly text: string,
  ) {
    this.name = `ci_${createHash("sha1")
      .update(`${types.join(",")}\n${text}`)
      .digest("hex")
      .slice(0, 24)}`;
    let holders = preparedOn.get(this.name);
    if (!holders) preparedOn.set(this.name, (holders = new WeakSet()));
    this.holders = holders;
  }

  /** The SQL that prepares it (what the connection runs once). */
  get prepareSql(): string {
    return `PREPARE ${this.name}(${this.types.join(", ")}) AS ${this.text}`;
  }

  /**
   * The SQL that runs it on `client` with `values` (text, each cast by PostgreSQL to its parameter's
   * type): its EXECUTE, with its PREPARE in front where the connection does not hold it yet. After
   * the query, `ran` or `failed`.
   */
  executeSql(client: PoolClient, values: string[]): string {
    const execute = `EXECUTE ${this.name}(${values.map((v) => escapeLiteral(v)).join(", ")})`;
    return this.holders.has(connectionOf(client)) ? execute : `${this.prepareSql}; ${execute}`;
  }

  /** The query with `executeSql` succeeded: the connection holds it. */
  ran(client: PoolClient): void {
    this.holders.add(connectionOf(client));
  }

  /** The query failed (and was rolled back): a PREPARE that ran before a later statement failed stays on the connection, so it is asked, not assumed. */
  async failed(client: PoolClient): Promise<void> {
    if (this.holders.has(connectionOf(client))) return;
    const held = await client.query("SELECT 1 FROM pg_prepared_statements WHERE name = $1", [this.name]).catch(() => undefined);
    if (held?.rowCount) this.holders.add(connectionOf(client));
  }

  /** Runs it with `values` in a transaction of its own on a connection of `pool`, after `settings` (`SET LOCAL …` statements, `;` between them); its rows. */
  async run<R extends QueryResultRow>(pool: Pool, settings: string, values: string[]): Promise<R[]> {
    const client = await pool.connect();
    try {
      const results = (await client.query(`BEGIN; ${settings}; ${this.executeSql(client, values)}; COMMIT`)) as unknown as Array<{ rows: R[] }>;
      this.ran(client);
      return results[results.length - 2].rows;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => undefined);
      await this.failed(client);
      throw err;
    } finally {
      client.release();
    }
  }
}
