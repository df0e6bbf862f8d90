/**
 * PostgreSQL access shared by every service: one pool per (process, URL), the platform
 * database created when missing, and versioned per-schema migrations that are safe when
 * several replicas start at once (an advisory lock serialises them).
 */
import { createHash } from "crypto";
import { Pool, PoolClient, PoolConfig, Client } from "pg";

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

/**
 * A statement PostgreSQL keeps parsed and planned on each connection (a named prepared statement):
 * for a hot statement whose text does not change from call to call (values as parameters), whose
 * parse and plan cost more than running it. The name comes from the text, so two texts never share
 * one (pg refuses a name reused for another text on the same connection). Make it once, not per call.
 */
export function preparedStatement(text: string): { name: string; text: string } {
  return { name: `ci-${createHash("sha1").update(text).digest("hex").slice(0, 20)}`, text };
}
