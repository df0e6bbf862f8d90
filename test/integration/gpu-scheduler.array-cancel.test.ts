/**
 * Cancelling a large array (issue 30) in the scheduler shell against the real PostgreSQL: every
 * unfinished job of it ends cancelled exactly once (the array's outcome counter, one status change
 * and one webhook delivery per job), the jobs on cards are stopped on their node, the finished ones
 * are left alone, and a second cancel changes nothing. The time is printed, not asserted
 * (recorded in bench/RESULTS.md). ARRAY_CANCEL_JOBS (default 10,000) sets the array's size.
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool, transaction } from "../../lib/db";
import type { NodeHeartbeat } from "../../lib/gpu-protocol";
import { NodeClient, Scheduler } from "../../services/gpu-scheduler/loop/scheduler";
import type { JobStatusChanged } from "../../services/gpu-scheduler/loop/status-events";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { DependenciesRepository } from "../../services/gpu-scheduler/store/dependencies.repository";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { PlacementRepository } from "../../services/gpu-scheduler/store/placement.repository";
import { insertGroup } from "../../services/gpu-scheduler/store/submit-group";
import { dropDatabase, testDatabaseUrl, waitFor } from "../support/platform";

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} } as unknown as LoggerInstance;
const CLIENT = randomUUID();
const CARDS = Array.from({ length: 4 }, (_, i) => `card-${i}`);
const JOBS = Number(process.env.ARRAY_CANCEL_JOBS || 10_000);

const heartbeat = (runningJobIds: string[] = []): NodeHeartbeat => ({
  nodeId: "n1",
  cards: CARDS.map((uuid, index) => ({ uuid, index, name: "Sim", memoryTotal: 1024, memoryUsed: 0, utilization: 0, temperature: 40 })),
  runningJobIds,
  executor: "process",
  at: new Date().toISOString(),
});

describe("gpu-scheduler array cancel - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pool: Pool;

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 8 });
    pool.on("error", () => undefined);
    await migrate(pool, "gpu_scheduler", migrations);
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  test(`gpu-scheduler array cancel - cancelling a ${JOBS}-job array ends each unfinished job cancelled exactly once, one event and webhook each`, async () => {
    const changes: JobStatusChanged[] = [];
    const repo = new JobsRepository(pool, 3600, (c) => changes.push(...c));
    const arrayId = randomUUID();
    const spec = { command: "true", timeoutSeconds: 3600, webhookUrl: "https://hooks.example.com/gpu" };
    const jobs = Array.from({ length: JOBS }, () => ({ id: randomUUID(), clientId: CLIENT, spec }));
    await transaction(pool, (tx) =>
      insertGroup(
        tx,
        { clientId: CLIENT, jobs, array: { id: arrayId, parallelism: null }, dependsOn: [], status: "queued", statusReason: null },
        new Date(),
        new DependenciesRepository(pool),
      ),
    );
    // 4 jobs start on the node's 4 cards (the node keeps them running); one more has completed.
    const stops: string[] = [];
    const nodes: NodeClient = {
      async run(_nodeId, p) {
        setImmediate(
          () =>
            void scheduler.applyEvent({ type: "started", jobId: p.jobId, nodeId: "n1", gpuUuid: p.gpuUuid, at: new Date().toISOString(), attempt: p.attempt }),
        );
      },
      async cancel(_nodeId, jobId) {
        stops.push(jobId);
        return { stopped: true };
      },
    };
    const scheduler = new Scheduler(repo, new PlacementRepository(pool), nodes, { now: () => new Date() }, quiet, {
      nodeTimeoutMs: 30_000,
      dispatchTimeoutMs: 5_000,
      warmUpMs: 0,
    });
    await scheduler.heartbeat(heartbeat());
    await scheduler.schedule({ newJob: true });
    const running = await waitFor(
      async () => {
        const { rows } = await pool.query<{ id: string }>(`SELECT id FROM gpu_scheduler.jobs WHERE array_id = $1 AND status = 'running'`, [arrayId]);
        return rows.length === CARDS.length && rows.map((r) => r.id);
      },
      { message: "4 jobs of the array running" },
    );
    // Their `running` changes are published after the commit: wait for them before counting the cancel's.
    await waitFor(() => changes.filter((c) => c.status === "running").length === CARDS.length, { message: "the 4 running changes" });
    const done = jobs.find((j) => !running.includes(j.id))!.id;
    await pool.query(`UPDATE gpu_scheduler.jobs SET status = 'completed', completed_at = now(), exit_code = 0 WHERE id = $1`, [done]);
    changes.length = 0;

    const t0 = performance.now();
    const cancelled = await scheduler.cancelArray(arrayId, "the array was cancelled");
    const ms = performance.now() - t0;
    console.log(`array cancel: ${JOBS} jobs (${CARDS.length} running) cancelled in ${ms.toFixed(0)} ms`);

    expect(cancelled).toBe(JOBS - 1);
    const counts = await pool.query(`SELECT total, completed, failed, cancelled FROM gpu_scheduler.job_arrays WHERE id = $1`, [arrayId]);
    expect(counts.rows[0]).toEqual({ total: JOBS, completed: 1, failed: 0, cancelled: JOBS - 1 });
    const statuses = await pool.query(
      `SELECT status, status_reason, count(*)::int AS n, count(completed_at)::int AS ended FROM gpu_scheduler.jobs WHERE array_id = $1 GROUP BY 1, 2 ORDER BY 1`,
      [arrayId],
    );
    expect(statuses.rows).toEqual([
      { status: "cancelled", status_reason: "the array was cancelled", n: JOBS - 1, ended: JOBS - 1 },
      { status: "completed", status_reason: null, n: 1, ended: 1 },
    ]);
    // One public change per job, from what the client saw before (running or queued) to cancelled.
    expect(changes).toHaveLength(JOBS - 1);
    expect(new Set(changes.map((c) => c.jobId)).size).toBe(JOBS - 1);
    expect(changes.every((c) => c.status === "cancelled" && c.webhook === true && c.clientId === CLIENT)).toBe(true);
    expect(
      changes
        .filter((c) => c.previous === "running")
        .map((c) => c.jobId)
        .sort(),
    ).toEqual([...running].sort());
    const hooks = await pool.query(
      `SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM gpu_scheduler.webhook_deliveries WHERE type = 'job.cancelled'`,
    );
    expect(hooks.rows[0]).toEqual({ n: JOBS - 1, jobs: JOBS - 1 });
    // The running jobs are stopped on their node; their card stays held until the node confirms.
    await waitFor(() => stops.length === CARDS.length, { message: "the running jobs stopped on the node" });
    expect(stops.sort()).toEqual([...running].sort());

    // A second cancel finds nothing left to change.
    changes.length = 0;
    expect(await scheduler.cancelArray(arrayId, "the array was cancelled")).toBe(0);
    expect(changes).toHaveLength(0);
    await scheduler.stop();
  }, 120_000);
});
