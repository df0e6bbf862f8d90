/**
 * The connections to the tenant server (DBAAS_ADMIN_URL, search_path pinned by search-path.ts):
 * its pools, the advisory locks and slots that bound work across replicas, one-off connections
 * into a tenant database, and transactions that give up quickly on a tenant's lock.
 * tenant-server.ts runs its steps through them.
 */
import { Client, Pool, PoolClient } from "pg";
import { newPool } from "../../lib/db";
import { retryTransient } from "./faults";
import { checkIdentifier } from "./naming";
import { pinnedConnection } from "./search-path";

/** The pool, or one connection of it (the one holding a lock, so work under it needs no second). */
export type Queryable = { query: Pool["query"] };

const CREATE_LOCK = "ci-platform:dbaas:create";
const DUMP_LOCK = "ci-platform:dbaas:dump";

export class TenantConnections {
  readonly pool: Pool;
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

  /** The advisory lock named `key`, held on a connection of the pool while `work` runs on that connection. */
  async withLock<T>(key: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(this.pool, async (client) => {
      await client.query("SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1))", [key]);
      try {
        return await work(client);
      } finally {
        await client.query("SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1))", [key]);
      }
    });
  }

  /**
   * Runs `work` holding every dump slot when none is held, i.e. no dump or restore runs on any
   * replica (their slots are this replica's DBAAS_SNAPSHOT_CONCURRENCY); false, without running it, otherwise.
   */
  async withoutDumps(work: () => Promise<void>): Promise<boolean> {
    return this.withClient(this.pool, async (client) => {
      const { rows } = await client.query<{ slot: number }>(
        "SELECT s AS slot FROM pg_catalog.generate_series(0, $2::int - 1) s WHERE pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext($1), s)",
        [DUMP_LOCK, this.dumpSlots],
      );
      try {
        if (rows.length < this.dumpSlots) return false;
        await work();
        return true;
      } finally {
        const taken = rows.map((r) => r.slot);
        await client.query("SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1), s) FROM pg_catalog.unnest($2::int[]) s", [DUMP_LOCK, taken]);
      }
    });
  }

  /** At most `createConcurrency` at once, across replicas (CREATE DATABASE). */
  async withCreateSlot<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.withSlot(this.createPool, CREATE_LOCK, this.createSlots, work);
  }

  /** At most `dumpConcurrency` at once, across replicas (pg_dump, pg_restore). */
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

  /** One transaction that gives up quickly (and is retried, `before` run ahead of each attempt) when a tenant session holds a lock. */
  async lockedTransaction(client: Client, statements: string, before?: () => Promise<void>): Promise<void> {
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
  async run(statements: string, via: Queryable = this.pool): Promise<Array<{ rows: Array<Record<string, unknown>> }>> {
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

  /** A connection of its own into the tenant database `databaseName`, closed once `work` is done. */
  async inDatabase<T>(databaseName: string, work: (client: Client) => Promise<T>): Promise<T> {
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
