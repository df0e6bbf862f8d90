/**
 * Pools and throw-away databases against the real PostgreSQL: a pool's idle connection ended by
 * the server (pg_terminate_backend: code 57P01, as a restart or DROP DATABASE … WITH (FORCE) sends
 * it) must not crash the process, and dropping a test database must not end the sessions of a pool
 * that is still saying goodbye (pool.end() resolves before its sockets close).
 */
import { Client } from "pg";
import { ensureDatabase, newPool } from "../../lib/db";
import { asPgAdmin, dropDatabase, testDatabaseUrl, waitFor } from "../support/platform";

const databaseExists = (name: string) => asPgAdmin(async (c) => (await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount === 1);

describe("pools and test databases - real PostgreSQL", () => {
  it("newPool - an idle connection the server ends is dropped quietly and the next query reconnects", async () => {
    const url = testDatabaseUrl();
    await ensureDatabase(url);
    const pool = newPool({ connectionString: url, max: 1 });
    try {
      const first = (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      expect(pool.idleCount).toBe(1);
      await asPgAdmin((c) => c.query("SELECT pg_terminate_backend($1, 3000)", [first]));
      // pg-pool removes the client once its error arrives (re-emitted on the pool: without a listener, an uncaught exception)
      await waitFor(() => pool.totalCount === 0, { timeoutMs: 5_000, message: "the ended connection to leave the pool" });
      const second = (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      expect(second).not.toBe(first);
    } finally {
      await pool.end();
      await dropDatabase(url);
    }
  });

  it("dropDatabase - waits for a closing session to leave instead of terminating it", async () => {
    const url = testDatabaseUrl();
    const name = new URL(url).pathname.slice(1);
    await ensureDatabase(url);
    // A session still busy when the drop starts (a pool saying goodbye is one for a few milliseconds).
    const closing = new Client({ connectionString: url });
    const errors: string[] = [];
    closing.on("error", (err: Error & { code?: string }) => errors.push(err.code ?? err.message));
    await closing.connect();
    const busy = closing.query("SELECT pg_sleep(0.5)");
    await waitFor(
      () => asPgAdmin(async (c) => (await c.query("SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND state = 'active'", [name])).rowCount === 1),
      {
        message: "the session's query to run",
      },
    );
    const dropped = dropDatabase(url);
    await expect(busy).resolves.toBeDefined(); // a FORCE drop ends it with 57P01
    await closing.end();
    await dropped;
    expect(await databaseExists(name)).toBe(false);
    expect(errors).toEqual([]);
  });

  it("dropDatabase - still ends a session a test leaked, after its wait", async () => {
    const url = testDatabaseUrl();
    const name = new URL(url).pathname.slice(1);
    await ensureDatabase(url);
    const leaked = new Client({ connectionString: url });
    const ended = new Promise<string | undefined>((resolve) => leaked.on("error", (err: Error & { code?: string }) => resolve(err.code)));
    await leaked.connect();
    await dropDatabase(url);
    expect(await databaseExists(name)).toBe(false);
    expect(await ended).toBe("57P01");
  });
});
