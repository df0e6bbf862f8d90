/**
 * gpu-scheduler's usage outbox against PostgreSQL and the real ledger: a replica that dies after
 * publishing a batch but before deleting it (its transaction never commits) leaves the rows, which
 * a replica publishes again later; the ledger counts each attempt once. Two replicas draining at
 * once publish disjoint batches (SKIP LOCKED). A published record stays readable (pendingOf) until
 * its keep time has passed, so quotas never see a job's use vanish between outbox and ledger.
 */
import { randomUUID } from "crypto";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import type { UsageBatch } from "../../lib/usage-protocol";
import { migrations as schedulerMigrations } from "../../services/gpu-scheduler/migrations";
import { UsageOutbox } from "../../services/gpu-scheduler/store/usage-outbox";
import { LedgerRepository } from "../../services/usage/ledger.repository";
import { migrations as usageMigrations } from "../../services/usage/migrations";
import { dropDatabase, testDatabaseUrl } from "../support/platform";

describe("usage outbox - a replica dying mid-publish", () => {
  const url = testDatabaseUrl();
  let pool: Pool;
  let ledger: LedgerRepository;
  const client = randomUUID();
  const outboxed = async () =>
    Number((await pool.query("SELECT count(*) AS n FROM gpu_scheduler.usage_outbox WHERE client_id = $1 AND published_at IS NULL", [client])).rows[0].n);
  const gpuSeconds = async () =>
    (await ledger.totals([client], new Date(Date.UTC(2030, 0, 1)), new Date(Date.UTC(2030, 1, 1)))).reduce((a, t) => a + t.amount, 0);
  /** `n` ended attempts of 10 s × `cards`, as the statement ending an attempt writes them. */
  const endAttempts = (n: number, cards = 2) =>
    pool.query(
      `INSERT INTO gpu_scheduler.usage_outbox (job_id, attempt, client_id, started_at, ended_at, cards, gpu_name)
       SELECT gen_random_uuid(), 1, $1, t, t + interval '10 seconds', $2, 'A100'
       FROM (SELECT timestamptz '2030-01-10 10:00:00+00' + i * interval '1 minute' AS t FROM generate_series(1, $3::int) i) s`,
      [client, cards, n],
    );

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 8 });
    pool.on("error", () => undefined);
    await migrate(pool, "gpu_scheduler", schedulerMigrations);
    await migrate(pool, "usage", usageMigrations);
    ledger = new LedgerRepository(pool);
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  it("usage outbox - published then died before deleting: published again by another replica, counted once", async () => {
    await endAttempts(30);
    const published: UsageBatch[] = [];
    // Replica A: the batch reaches the ledger, then the process dies before its DELETE commits.
    const dying = new UsageOutbox(
      pool,
      async (batch) => {
        published.push(batch);
        await ledger.record(batch.records);
        throw new Error("replica died");
      },
      20,
    );
    await expect(dying.drain()).rejects.toThrow("replica died");
    expect(published[0].records).toHaveLength(20);
    expect(await outboxed()).toBe(30); // nothing deleted: the rows stay for the next tick
    expect(await gpuSeconds()).toBeCloseTo(20 * 10 * 2, 6);
    // Replica B, later: publishes everything again; the 20 already stored count nothing more.
    const news: number[] = [];
    const healthy = new UsageOutbox(pool, async (batch) => void news.push(await ledger.record(batch.records)), 20);
    expect(await healthy.drain()).toBe(30);
    expect(news.reduce((a, n) => a + n, 0)).toBe(10);
    expect(await outboxed()).toBe(0);
    expect(await gpuSeconds()).toBeCloseTo(30 * 10 * 2, 6);
  });

  it("usage outbox - two replicas draining at once publish disjoint batches; every attempt counts once", async () => {
    const before = await gpuSeconds();
    await endAttempts(100, 1);
    const keys: string[] = [];
    const replica = () =>
      new UsageOutbox(
        pool,
        async (batch) => {
          keys.push(...batch.records.map((r) => r.key));
          await ledger.record(batch.records);
        },
        10,
      );
    const [a, b] = await Promise.all([replica().drain(), replica().drain()]);
    expect(a + b).toBe(100);
    expect(new Set(keys).size).toBe(keys.length);
    expect(await outboxed()).toBe(0);
    expect((await gpuSeconds()) - before).toBeCloseTo(100 * 10, 6);
  });

  it("usage outbox - published records stay readable to the quotas until their keep time, then a drain forgets them", async () => {
    const other = randomUUID();
    await pool.query(
      `INSERT INTO gpu_scheduler.usage_outbox (job_id, attempt, client_id, started_at, ended_at, cards, gpu_name)
       VALUES (gen_random_uuid(), 1, $1, now() - interval '10 seconds', now(), 1, 'A100')`,
      [other],
    );
    const published: string[] = [];
    const keeping = new UsageOutbox(pool, async (batch) => void published.push(...batch.records.map((r) => r.key)), 10, 60_000);
    await keeping.drain();
    expect(published).toHaveLength(1);
    // Out on the channel, not yet necessarily in the ledger: still read, and not published again.
    expect((await keeping.pendingOf([other])).map((r) => r.key)).toEqual(published);
    await keeping.drain();
    expect(published).toHaveLength(1);
    // A keep time already passed: the next drain forgets it.
    await new UsageOutbox(pool, async () => undefined, 10, 0).drain();
    expect(await keeping.pendingOf([other])).toEqual([]);
  });
});
