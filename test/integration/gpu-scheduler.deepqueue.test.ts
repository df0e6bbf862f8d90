/**
 * Deep queues and long histories against the real PostgreSQL: the counters stay exact across every
 * transition, archiving and retention move and remove only what they should (settled webhook
 * deliveries included), concurrent insert batches of several accounts keep the queued-jobs limit
 * and their places exact (in a transaction of their own, and in one round trip), and the hot
 * queries are planned through their indexes on a table holding 20,000 queued and 100,000 ended jobs.
 */
import { randomUUID } from "crypto";
import { Pool, PoolClient } from "pg";
import { ensureDatabase, migrate, transaction, newPool } from "../../lib/db";
import { HistoryRepository } from "../../services/gpu-scheduler/store/history.repository";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { submitBatch } from "../../services/gpu-scheduler/store/submit-batch";
import { NewJob } from "../../services/gpu-scheduler/store/job-row";
import { PRIORITIES } from "../../lib/job-spec";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { PlacementRepository } from "../../services/gpu-scheduler/store/placement.repository";
import { QueuePositions } from "../../services/gpu-scheduler/api/queue-positions";
import type { JobPatch } from "../../services/gpu-scheduler/core/transitions";
import { insertGroup } from "../../services/gpu-scheduler/store/submit-group";
import { dropDatabase, testDatabaseUrl } from "../support/platform";

const job = (clientId: string, priority = 1): NewJob => ({
  id: randomUUID(),
  clientId,
  spec: { command: "true", timeoutSeconds: 60, priority: PRIORITIES[priority] },
});

describe("gpu-scheduler deep queue - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pool: Pool;
  let repo: JobsRepository;
  let places: PlacementRepository;
  let history: HistoryRepository;

  /** What the counters must say, counted from the rows of both tables. */
  const truth = async () => {
    const { rows } = await pool.query<{ status: string; n: number }>(
      `SELECT CASE WHEN status = 'running' AND started_at IS NULL THEN 'assigned' ELSE status END AS status, count(*)::int AS n
       FROM (SELECT status, started_at FROM gpu_scheduler.jobs UNION ALL SELECT status, started_at FROM gpu_scheduler.jobs_history) j GROUP BY 1`,
    );
    const counts = { waiting: 0, queued: 0, assigned: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
    for (const r of rows) counts[r.status as keyof typeof counts] = r.n;
    // A job waiting for its dependencies counts as queued (migration 17).
    const perAccount = await pool.query<{ c: string; n: number }>(
      `SELECT client_id AS c, count(*)::int AS n FROM gpu_scheduler.jobs WHERE status IN ('queued', 'waiting') GROUP BY 1 ORDER BY 1`,
    );
    return { counts, depth: counts.waiting + counts.queued + counts.assigned, perAccount: perAccount.rows };
  };
  const counters = async () => {
    const accounts = (await repo.queueAccounts()).map((a) => ({ c: a.clientId, n: a.queued })).sort((a, b) => (a.c < b.c ? -1 : 1));
    return { counts: await repo.countByStatus(), depth: await repo.queueDepth(), perAccount: accounts };
  };
  const expectExact = async (step: string) => expect({ step, ...(await counters()) }).toEqual({ step, ...(await truth()) });
  const insert = (jobs: NewJob[], limit = 1000) => transaction(pool, (tx: PoolClient) => repo.admitAndInsert(jobs, new Date(), () => limit, tx));
  const patch = async (id: string, p: JobPatch) => {
    const seen = (await repo.states([id])).get(id)!;
    expect(await repo.compareAndSet([{ id, seen, patch: p }])).toEqual(new Set([id]));
  };

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 10 });
    pool.on("error", () => undefined);
    await migrate(pool, "gpu_scheduler", migrations);
    repo = new JobsRepository(pool);
    places = new PlacementRepository(pool);
    history = new HistoryRepository(pool);
  });
  beforeEach(async () => {
    await pool.query("TRUNCATE gpu_scheduler.jobs, gpu_scheduler.jobs_history, gpu_scheduler.job_attempts, gpu_scheduler.account_usage");
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  test("gpu-scheduler deep queue - counts stay exact across insert, place, start, finish, cancel, retry, expire, archive and removal", async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await insert([job(a), job(a, 2), job(b), job(b, 0), job(a), job(b)]);
    await expectExact("inserted");
    await transaction(pool, (tx: PoolClient) =>
      insertGroup(tx, { clientId: b, jobs: [job(b)], dependsOn: [], status: "waiting", statusReason: "waiting for job x to succeed" }, new Date(), {
        insert: async () => undefined,
      }),
    );
    await expectExact("a job waiting for its dependencies: queued for the counters");
    const placed = await places.placeUnderLock(
      3,
      ({ queue }) => queue.slice(0, 3).map((q, i) => ({ jobId: q.jobId, nodeId: "n1", gpuUuid: `g${i}`, gpuUuids: [`g${i}`], gpuName: "Card" })),
      new Date(),
    );
    expect(placed.assigned).toHaveLength(3);
    await expectExact("placed");
    const [first, second, third] = placed.assigned.map((j) => j.id);
    await patch(first, { status: "running" }); // the node has it, not started yet: still counted as waiting
    await expectExact("taken, not started");
    const t0 = new Date(Date.now() - 5000);
    await patch(first, { startedAt: t0 });
    await patch(second, { status: "running", startedAt: t0 });
    await expectExact("started");
    await patch(first, { status: "completed", completedAt: new Date(), exitCode: 0, holding: false });
    await expectExact("finished");
    const endedAttempt = { attempt: 1, nodeId: "n1", startedAt: t0, endedAt: new Date(), exitCode: 1, output: null, errorMessage: "exit code 1" };
    await patch(second, { status: "queued", nodeId: null, gpuUuid: null, holding: false, notBefore: new Date(Date.now() + 60_000), endedAttempt });
    await expectExact("retried: back to the queue");
    await patch(third, { status: "cancelled", completedAt: new Date(), holding: false });
    const queued = (await truth()).perAccount.length
      ? (await pool.query<{ id: string }>("SELECT id FROM gpu_scheduler.jobs WHERE status = 'queued' LIMIT 2")).rows
      : [];
    await patch(queued[0].id, { status: "cancelled", completedAt: new Date() }); // cancelled while queued
    await patch(queued[1].id, { status: "cancelled", completedAt: new Date(), statusReason: "Queue timeout expired" }); // expired
    await expectExact("cancelled and expired");
    expect(await history.archive(new Date(Date.now() + 1000), 100)).toBe(4);
    await expectExact("archived");
    expect(await history.purge(new Date(Date.now() + 1000), 100)).toBe(4);
    await expectExact("removed after retention");
    await pool.query("TRUNCATE gpu_scheduler.jobs");
    await expectExact("after a TRUNCATE (recounted)");
  });

  test("gpu-scheduler deep queue - archiving moves only ended jobs whose card is free, ended before the cutoff; reads find them; retention removes only older ones with their attempts", async () => {
    const client = randomUUID();
    const ids = (await insert(Array.from({ length: 6 }, () => job(client)))).created.map((c) => c.id);
    const old = new Date(Date.now() - 3_600_000);
    const recent = new Date(Date.now() - 1000);
    await pool.query(
      `UPDATE gpu_scheduler.jobs SET status = CASE id WHEN $1 THEN 'completed' WHEN $2 THEN 'failed' WHEN $3 THEN 'cancelled' WHEN $4 THEN 'completed' ELSE status END,
         completed_at = CASE WHEN id IN ($1, $2, $3) THEN $5::timestamptz WHEN id = $4 THEN $6::timestamptz END,
         holding = (id = $2), gpu_uuid = CASE WHEN id = $2 THEN 'g1' END WHERE id = ANY($7::uuid[])`,
      [ids[0], ids[1], ids[2], ids[3], old, recent, ids],
    );
    await pool.query(`INSERT INTO gpu_scheduler.job_attempts (job_id, attempt, ended_at, error_message) VALUES ($1, 1, $2, 'x'), ($3, 1, $2, 'y')`, [
      ids[0],
      old,
      ids[4],
    ]);
    // Cutoff between old and recent: ids[0] and ids[2] move; ids[1] still holds its card, ids[3] ended after, 4 and 5 are queued.
    expect(await history.archive(new Date(Date.now() - 60_000), 100)).toBe(2);
    const where = async (id: string) =>
      (
        await pool.query(`SELECT 'jobs' AS t FROM gpu_scheduler.jobs WHERE id = $1 UNION ALL SELECT 'history' FROM gpu_scheduler.jobs_history WHERE id = $1`, [
          id,
        ])
      ).rows.map((r) => r.t);
    expect(await Promise.all(ids.map(where))).toEqual([["history"], ["jobs"], ["history"], ["jobs"], ["jobs"], ["jobs"]]);
    // The archived job reads the same as before, through either lookup and the list (newest first, merged).
    expect(await repo.findForClient(ids[0], client)).toMatchObject({ id: ids[0], status: "completed", client_id: client });
    expect(await repo.findForClient(ids[0], randomUUID())).toBeUndefined();
    expect((await repo.find(ids[2]))?.status).toBe("cancelled");
    expect((await repo.listForClient(client, 50)).map((r) => r.id)).toEqual([...ids].reverse());
    expect((await repo.listForClient(client, 3)).map((r) => r.id)).toEqual([ids[5], ids[4], ids[3]]);
    // Bounded: one at a time.
    await pool.query(`UPDATE gpu_scheduler.jobs SET holding = false WHERE id = $1`, [ids[1]]);
    expect(await history.archive(new Date(), 1)).toBe(1);
    expect(await history.archive(new Date(), 1)).toBe(1);
    expect(await history.archive(new Date(), 1)).toBe(0);
    // Retention: only the jobs that ended before it, and only their attempts.
    expect(await history.purge(new Date(Date.now() - 60_000), 100)).toBe(3);
    expect(await repo.find(ids[0])).toBeUndefined();
    expect(await repo.findForClient(ids[3], client)).toMatchObject({ status: "completed" });
    const attempts = await pool.query(`SELECT job_id FROM gpu_scheduler.job_attempts`);
    expect(attempts.rows).toEqual([{ job_id: ids[4] }]);
    expect(await history.purge(new Date(Date.now() - 60_000), 100)).toBe(0);
  });

  test("gpu-scheduler deep queue - retention removes settled webhook deliveries older than the cutoff, in bounded batches; pending ones stay owed", async () => {
    await pool.query("TRUNCATE gpu_scheduler.webhook_deliveries");
    const client = randomUUID();
    const delivery = (status: string, ageDays: number) =>
      pool.query(
        `INSERT INTO gpu_scheduler.webhook_deliveries (id, client_id, job_id, type, url, status, created_at)
         VALUES ($1, $2, $3, 'job.completed', 'http://127.0.0.1:9/hook', $4, now() - make_interval(days => $5))`,
        [randomUUID(), client, randomUUID(), status, ageDays],
      );
    for (const [status, age] of [
      ["delivered", 40],
      ["failed", 40],
      ["delivered", 31],
      ["pending", 40],
      ["delivered", 1],
      ["failed", 1],
    ] as const)
      await delivery(status, age);
    const left = async () =>
      (
        await pool.query<{ status: string; age: number }>(
          `SELECT status, round(extract(epoch FROM now() - created_at) / 86400)::int AS age FROM gpu_scheduler.webhook_deliveries ORDER BY age DESC, status`,
        )
      ).rows;
    const cutoff = new Date(Date.now() - 30 * 86_400_000);
    expect(await history.purgeDeliveries(cutoff, 2)).toBe(2); // a batch holds at most its limit
    expect(await history.purgeDeliveries(cutoff, 2)).toBe(1);
    expect(await history.purgeDeliveries(cutoff, 2)).toBe(0);
    expect(await left()).toEqual([
      { status: "pending", age: 40 },
      { status: "delivered", age: 1 },
      { status: "failed", age: 1 },
    ]);
  });

  test("gpu-scheduler deep queue - the history has the queue table's columns (a column added to one must be added to the other)", async () => {
    const columns = async (table: string) =>
      (
        await pool.query(
          `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'gpu_scheduler' AND table_name = $1 ORDER BY column_name`,
          [table],
        )
      ).rows;
    expect(await columns("jobs_history")).toEqual(await columns("jobs"));
  });

  test("gpu-scheduler deep queue - for one release, a job inserted as the previous version does (columns, no document) gets its document, and a new job fills the old columns", async () => {
    const old = randomUUID();
    await pool.query(
      `INSERT INTO gpu_scheduler.jobs (id, client_id, command, container_image, gpu_type, gpu_match, status, created_at, timeout_seconds, priority, gpu_count)
       VALUES ($1, $2, 'echo old', 'busybox:1', 'A100', 'a100', 'queued', now(), 60, 2, 2)`,
      [old, randomUUID()],
    );
    expect((await repo.find(old))!.spec).toEqual({
      command: "echo old",
      containerImage: "busybox:1",
      gpuType: "A100",
      timeoutSeconds: 60,
      priority: "high",
      gpuCount: 2,
      maxRetries: 0,
    });
    const fresh = job(randomUUID());
    await repo.insert([{ ...fresh, spec: { ...fresh.spec, containerImage: "busybox:2" } }], new Date());
    const { rows } = await pool.query(`SELECT command, container_image FROM gpu_scheduler.jobs WHERE id = $1`, [fresh.id]);
    expect(rows[0]).toEqual({ command: "true", container_image: "busybox:2" });
  });

  type Batch = (
    jobs: NewJob[],
    limit: number,
    positions: QueuePositions,
  ) => Promise<{
    created: Array<{ id: string; clientId: string; ahead: number }>;
    refused: Map<string, { limit: number; used: number }>;
    positions: () => Promise<Map<string, number>>;
  }>;
  const inTransaction: Batch = async (jobs, limit, positions) => {
    const out = await insert(jobs, limit);
    return { ...out, positions: () => positions.ofCreated(out.created) };
  };
  const inOneRoundTrip: Batch = async (jobs, limit, positions) => {
    const out = await submitBatch(pool, jobs, new Date(), () => limit, repo);
    return { ...out, positions: () => positions.ofCreatedAmong(out.created, out.accounts) };
  };

  test.each([
    ["in a transaction of their own (keyed submissions)", inTransaction],
    ["in one round trip each (store/submit-batch.ts)", inOneRoundTrip],
  ])(
    "gpu-scheduler deep queue - concurrent batches of several accounts, %s, keep the queued-jobs limit and each job's place in its account exact",
    async (_name, batch) => {
      const accounts = [randomUUID(), randomUUID(), randomUUID()];
      const positions = new QueuePositions(repo, {
        limitsFor: (ids) => Promise.resolve(new Map(ids.map((id) => [id, { weight: 1, runningGpus: null, queuedJobs: LIMIT }]))),
      });
      const LIMIT = 30;
      // 12 batches at once, each 4 jobs of every account: 48 per account offered, 30 admitted.
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, () =>
          batch(
            accounts.flatMap((c) => Array.from({ length: 4 }, () => job(c))),
            LIMIT,
            positions,
          ),
        ),
      );
      for (const c of accounts) {
        const created = outcomes.flatMap((o) => o.created.filter((j) => j.clientId === c));
        expect(created).toHaveLength(LIMIT);
        // Each job's count of its account's jobs ahead is its rank: 0 … 29, each once.
        expect(created.map((j) => j.ahead).sort((x, y) => x - y)).toEqual(Array.from({ length: LIMIT }, (_, i) => i));
      }
      const refusals = outcomes.flatMap((o) => [...o.refused.values()]);
      expect(refusals).toHaveLength(3 * (48 - LIMIT));
      expect(new Set(refusals.map((r) => `${r.limit}/${r.used}`))).toEqual(new Set([`${LIMIT}/${LIMIT}`]));
      await expectExact("after concurrent batches");
      // Positions: with no usage, the fair order takes the accounts in turn (ties by account id).
      const { rows } = await pool.query<{ id: string; client_id: string }>(`SELECT id, client_id FROM gpu_scheduler.jobs ORDER BY seq`);
      const sorted: string[] = [...accounts].sort();
      const expected = new Map<string, number>();
      const seen = new Map<string, number>();
      for (const r of rows) {
        const i = seen.get(r.client_id) ?? 0;
        seen.set(r.client_id, i + 1);
        expected.set(r.id, i * accounts.length + sorted.indexOf(r.client_id) + 1);
      }
      expect(await positions.of(rows.map((r) => r.id))).toEqual(expected);
      // A new batch's positions, from its count per account, match a later read of the same jobs.
      const fresh = randomUUID();
      const more = await batch([job(accounts[0], 2), job(fresh)], LIMIT + 1, positions);
      const created = await more.positions();
      expect(created).toEqual(await positions.of(more.created.map((c) => c.id)));
      // High priority: first of its account, after the first job of each account with a lower id (all at share 0).
      expect(created.get(more.created[0].id)).toBe(1 + [...accounts, fresh].filter((c) => c < accounts[0]).length);
    },
  );
});
