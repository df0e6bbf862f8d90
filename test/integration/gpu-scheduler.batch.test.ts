/**
 * Job arrays and dependencies (issue 30) in the scheduler shell against the real PostgreSQL: a
 * 1,000-job array inserted in one statement and run to the end under its arrayParallelism (the
 * snapshot's SQL and `plan` together), its outcome counters exact; the dependency sweep catching a
 * resolution that was missed; a 10,000-job array cancelled in one statement, every unfinished job
 * cancelled exactly once (outcome counter, one status change and one webhook delivery each), the
 * running ones stopped on their node, a second cancel changing nothing (its time printed, not
 * asserted: bench:array-cancel compares it). gpu-node is an in-memory NodeClient.
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool, transaction } from "../../lib/db";
import type { NodeHeartbeat } from "../../lib/gpu-protocol";
import type { RunJobParams } from "../../lib/job-spec";
import { toArrayView } from "../../services/gpu-scheduler/api/array-actions";
import { DependencyResolver } from "../../services/gpu-scheduler/loop/dependency-resolver";
import { JobWriter } from "../../services/gpu-scheduler/loop/job-writer";
import { NodeClient, Scheduler } from "../../services/gpu-scheduler/loop/scheduler";
import type { JobStatusChanged } from "../../services/gpu-scheduler/loop/status-events";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { ArraysRepository } from "../../services/gpu-scheduler/store/arrays.repository";
import { HistoryRepository } from "../../services/gpu-scheduler/store/history.repository";
import { DependenciesRepository } from "../../services/gpu-scheduler/store/dependencies.repository";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { PlacementRepository } from "../../services/gpu-scheduler/store/placement.repository";
import { insertGroup, JobGroup } from "../../services/gpu-scheduler/store/submit-group";
import { dropDatabase, testDatabaseUrl, waitFor } from "../support/platform";

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} } as unknown as LoggerInstance;
const CLIENT = randomUUID();
const CARDS = Array.from({ length: 8 }, (_, i) => `card-${i}`);
/** The array cancelled at once (ARRAY_CANCEL_JOBS, default 10,000: the most an array may have). */
const CANCEL_JOBS = Number(process.env.ARRAY_CANCEL_JOBS || 10_000);

const heartbeat = (runningJobIds: string[] = []): NodeHeartbeat => ({
  nodeId: "n1",
  cards: CARDS.map((uuid, index) => ({ uuid, index, name: "Sim", memoryTotal: 1024, memoryUsed: 0, utilization: 0, temperature: 40 })),
  runningJobIds,
  executor: "process",
  at: new Date().toISOString(),
});

describe("gpu-scheduler batch - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pool: Pool;
  let repo: JobsRepository;
  const deps = () => new DependenciesRepository(pool);
  const group = (n: number, extra: Partial<JobGroup> = {}): JobGroup => {
    const spec = { command: "true", timeoutSeconds: 3600 };
    return {
      clientId: CLIENT,
      jobs: Array.from({ length: n }, () => ({ id: randomUUID(), clientId: CLIENT, spec })),
      dependsOn: [],
      status: "queued",
      statusReason: null,
      ...extra,
    };
  };
  const submit = (g: JobGroup) => transaction(pool, (tx) => insertGroup(tx, g, new Date(), deps()));

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 8 });
    pool.on("error", () => undefined);
    await migrate(pool, "gpu_scheduler", migrations);
    repo = new JobsRepository(pool);
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  test("gpu-scheduler batch - a 1,000-job array with parallelism 3 on 8 cards runs each job once, never more than 3 at a time, counts exact", async () => {
    const arrayId = randomUUID();
    const g = group(1000, { array: { id: arrayId, parallelism: 3 } });
    const t0 = Date.now();
    await submit(g);
    const insertMs = Date.now() - t0;
    expect(insertMs).toBeLessThan(5_000);
    const runs: RunJobParams[] = [];
    let onCards = 0;
    let most = 0;
    // The node takes each job and reports it finished right after (two events), outside the run call.
    const nodes: NodeClient = {
      async run(_nodeId, params) {
        runs.push(params);
        most = Math.max(most, ++onCards);
        setImmediate(() => void finish(params));
      },
      async cancel() {
        return { stopped: false };
      },
    };
    const finish = async (p: RunJobParams) => {
      const at = new Date().toISOString();
      await scheduler.applyEvent({ type: "started", jobId: p.jobId, nodeId: "n1", gpuUuid: p.gpuUuid, at, attempt: p.attempt });
      onCards--;
      await scheduler.applyEvent({
        type: "finished",
        jobId: p.jobId,
        nodeId: "n1",
        gpuUuid: p.gpuUuid,
        at,
        startedAt: at,
        exitCode: 0,
        output: "",
        attempt: p.attempt,
      });
    };
    const scheduler = new Scheduler(repo, new PlacementRepository(pool), nodes, { now: () => new Date() }, quiet, {
      nodeTimeoutMs: 30_000,
      dispatchTimeoutMs: 5_000,
      warmUpMs: 0,
    });
    await scheduler.heartbeat(heartbeat());
    await scheduler.schedule({ newJob: true });
    const arrays = new ArraysRepository(pool);
    await waitFor(async () => toArrayView(arrayId, 1000, await arrays.members(arrayId)).counts.completed === 1000, {
      timeoutMs: 120_000,
      intervalMs: 200,
      message: "every job of the array completed",
    });
    await scheduler.stop();
    expect(most).toBeLessThanOrEqual(3);
    expect(runs).toHaveLength(1000);
    const byId = new Map(g.jobs.map((j, i) => [j.id, i]));
    for (const r of runs) expect(r.env).toEqual({ CI_ARRAY_ID: arrayId, CI_ARRAY_INDEX: String(byId.get(r.jobId)) });
    const { rows } = await pool.query("SELECT total, completed, failed, cancelled FROM gpu_scheduler.job_arrays WHERE id = $1", [arrayId]);
    expect(rows[0]).toEqual({ total: 1000, completed: 1000, failed: 0, cancelled: 0 });
  }, 150_000);

  test("gpu-scheduler batch - the snapshot skips an array at its parallelism whole: the account's other jobs are read, the array's are not", async () => {
    await pool.query("TRUNCATE gpu_scheduler.jobs");
    const places = new PlacementRepository(pool);
    const arrayId = randomUUID();
    await submit(group(50, { array: { id: arrayId, parallelism: 2 } }));
    const plain = group(1);
    await submit(plain);
    const first = await places.placeUnderLock(
      16,
      ({ queue, arrays }) => {
        expect(arrays).toEqual(new Map([[arrayId, { parallelism: 2, active: 0 }]]));
        return queue
          .filter((q) => q.arrayId === arrayId)
          .slice(0, 2)
          .map((q, i) => ({ jobId: q.jobId, nodeId: "n1", gpuUuid: `s${i}`, gpuUuids: [`s${i}`], gpuName: "Sim" }));
      },
      new Date(),
    );
    expect(first.assigned).toHaveLength(2);
    let read: string[] = [];
    await places.placeUnderLock(16, ({ queue }) => ((read = queue.map((q) => q.jobId)), []), new Date());
    expect(read).toEqual([plain.jobs[0].id]);
  });

  test("gpu-scheduler batch - retention removes an array with its last job, and the dependencies of what it removes", async () => {
    const history = new HistoryRepository(pool);
    const arrayId = randomUUID();
    const g = group(2, {
      array: { id: arrayId, parallelism: null },
      dependsOn: [{ jobId: randomUUID(), condition: "finished" }],
      status: "waiting",
      statusReason: "w",
    });
    await submit(g);
    await new JobWriter(repo).applyTo(
      g.jobs.map((j) => j.id),
      () => ({ status: "cancelled", completedAt: new Date(Date.now() - 60_000) }),
    );
    const counts = await pool.query("SELECT cancelled FROM gpu_scheduler.job_arrays WHERE id = $1", [arrayId]);
    expect(counts.rows).toEqual([{ cancelled: 2 }]);
    expect(await history.archive(new Date(), 100)).toBeGreaterThanOrEqual(2);
    expect(await history.purge(new Date(), 1000)).toBeGreaterThanOrEqual(2);
    const left = await pool.query(
      "SELECT (SELECT count(*) FROM gpu_scheduler.job_arrays WHERE id = $1)::int AS arrays, (SELECT count(*) FROM gpu_scheduler.job_dependencies WHERE dependant = $1)::int AS deps",
      [arrayId],
    );
    expect(left.rows).toEqual([{ arrays: 0, deps: 0 }]);
  });

  test("gpu-scheduler batch - a waiting job whose dependency ended unseen is released by the sweep, and a chain is cancelled transitively", async () => {
    const writer = new JobWriter(repo);
    let released = 0;
    const resolver = new DependencyResolver(deps(), writer, { now: () => new Date() }, () => released++, quiet);
    const [target, other] = [group(1), group(1)];
    await submit(target);
    await submit(other);
    const dependant = group(1, { dependsOn: [{ jobId: target.jobs[0].id, condition: "succeeded" }], status: "waiting", statusReason: "w" });
    await submit(dependant);
    // The target completes with no resolver listening (a crash after the commit).
    const end = async (id: string, status: "completed" | "failed") =>
      writer.applyTo([id], () => ({ status, completedAt: new Date(), ...(status === "failed" && { errorMessage: "x" }) }));
    await end(target.jobs[0].id, "completed");
    expect((await repo.find(dependant.jobs[0].id))!.status).toBe("waiting");
    await resolver.sweep();
    expect((await repo.find(dependant.jobs[0].id))!).toMatchObject({ status: "queued", status_reason: null });
    expect(released).toBe(1);

    // other fails → b (succeeded on other) cancelled → c (succeeded on b) cancelled: through the repository's callback.
    repo.dependantsDue = (ended) => resolver.ended(ended);
    const b = group(1, { dependsOn: [{ jobId: other.jobs[0].id, condition: "succeeded" }], status: "waiting", statusReason: "w" });
    await submit(b);
    const c = group(1, { dependsOn: [{ jobId: b.jobs[0].id, condition: "succeeded" }], status: "waiting", statusReason: "w" });
    await submit(c);
    await end(other.jobs[0].id, "failed");
    const cRow = await waitFor(
      async () => {
        const row = await repo.find(c.jobs[0].id);
        return row?.status === "cancelled" ? row : false;
      },
      { message: "the chain cancelled" },
    );
    expect(cRow.status_reason).toMatch(new RegExp(`^dependency ${b.jobs[0].id} was cancelled`));
    expect((await repo.find(b.jobs[0].id))!.status_reason).toMatch(new RegExp(`^dependency ${other.jobs[0].id} failed`));
    repo.dependantsDue = () => undefined;
  });

  test(`gpu-scheduler batch - cancelling a ${CANCEL_JOBS}-job array ends each unfinished job cancelled exactly once, one event and webhook each`, async () => {
    const changes: JobStatusChanged[] = [];
    const cancelRepo = new JobsRepository(pool, 3600, (c) => changes.push(...c));
    const arrayId = randomUUID();
    // An account and a node of its own: what the tests above left queued or holding cards takes no part.
    const clientId = randomUUID();
    const g = group(CANCEL_JOBS, { clientId, array: { id: arrayId, parallelism: null } });
    for (const j of g.jobs) Object.assign(j, { clientId, spec: { ...j.spec, webhookUrl: "https://hooks.example.com/gpu" } });
    await submit(g);
    const { jobs } = g;
    // Jobs start on the node's cards (the node keeps them running); one more has completed.
    const stops: string[] = [];
    const nodes: NodeClient = {
      async run(_nodeId, p) {
        setImmediate(
          () =>
            void scheduler.applyEvent({ type: "started", jobId: p.jobId, nodeId: "n2", gpuUuid: p.gpuUuid, at: new Date().toISOString(), attempt: p.attempt }),
        );
      },
      async cancel(_nodeId, jobId) {
        stops.push(jobId);
        return { stopped: true };
      },
    };
    const scheduler = new Scheduler(cancelRepo, new PlacementRepository(pool), nodes, { now: () => new Date() }, quiet, {
      nodeTimeoutMs: 30_000,
      dispatchTimeoutMs: 5_000,
      warmUpMs: 0,
    });
    const own = heartbeat();
    await scheduler.heartbeat({ ...own, nodeId: "n2", cards: own.cards.map((c) => ({ ...c, uuid: `n2-${c.uuid}` })) });
    await scheduler.schedule({ newJob: true });
    // Every card of n2 runs a job (jobs the tests above left queued take some): the array's among them.
    await waitFor(async () => (await pool.query(`SELECT 1 FROM gpu_scheduler.jobs WHERE node_id = 'n2' AND status = 'running'`)).rowCount === CARDS.length, {
      message: "n2's 8 cards running jobs",
    });
    const { rows: mine } = await pool.query<{ id: string }>(`SELECT id FROM gpu_scheduler.jobs WHERE array_id = $1 AND status = 'running'`, [arrayId]);
    const running = mine.map((r) => r.id);
    expect(running.length).toBeGreaterThan(0);
    // Their `running` changes are published after the commit: wait for them before counting the cancel's.
    await waitFor(() => changes.filter((c) => c.status === "running" && c.clientId === clientId).length === running.length, {
      message: "the array's running changes",
    });
    const done = jobs.find((j) => !running.includes(j.id))!.id;
    await pool.query(`UPDATE gpu_scheduler.jobs SET status = 'completed', completed_at = now(), exit_code = 0 WHERE id = $1`, [done]);
    changes.length = 0;

    const t0 = performance.now();
    const cancelled = await scheduler.cancelArray(arrayId, "the array was cancelled");
    const ms = performance.now() - t0;
    console.log(`array cancel: ${CANCEL_JOBS} jobs (${running.length} running) cancelled in ${ms.toFixed(0)} ms`);

    expect(cancelled).toBe(CANCEL_JOBS - 1);
    const counts = await pool.query(`SELECT total, completed, failed, cancelled FROM gpu_scheduler.job_arrays WHERE id = $1`, [arrayId]);
    expect(counts.rows[0]).toEqual({ total: CANCEL_JOBS, completed: 1, failed: 0, cancelled: CANCEL_JOBS - 1 });
    const statuses = await pool.query(
      `SELECT status, status_reason, count(*)::int AS n, count(completed_at)::int AS ended FROM gpu_scheduler.jobs WHERE array_id = $1 GROUP BY 1, 2 ORDER BY 1`,
      [arrayId],
    );
    expect(statuses.rows).toEqual([
      { status: "cancelled", status_reason: "the array was cancelled", n: CANCEL_JOBS - 1, ended: CANCEL_JOBS - 1 },
      { status: "completed", status_reason: null, n: 1, ended: 1 },
    ]);
    // One public change per job, from what the client saw before (running or queued) to cancelled.
    expect(changes).toHaveLength(CANCEL_JOBS - 1);
    expect(new Set(changes.map((c) => c.jobId)).size).toBe(CANCEL_JOBS - 1);
    expect(changes.every((c) => c.status === "cancelled" && c.webhook === true && c.clientId === clientId)).toBe(true);
    expect(
      changes
        .filter((c) => c.previous === "running")
        .map((c) => c.jobId)
        .sort(),
    ).toEqual([...running].sort());
    const hooks = await pool.query(
      `SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM gpu_scheduler.webhook_deliveries WHERE type = 'job.cancelled'`,
    );
    expect(hooks.rows[0]).toEqual({ n: CANCEL_JOBS - 1, jobs: CANCEL_JOBS - 1 });
    // The running jobs are stopped on their node; their card stays held until the node confirms.
    await waitFor(() => stops.length === running.length, { message: "the running jobs stopped on the node" });
    expect(stops.sort()).toEqual([...running].sort());

    // A second cancel finds nothing left to change.
    changes.length = 0;
    expect(await scheduler.cancelArray(arrayId, "the array was cancelled")).toBe(0);
    expect(changes).toHaveLength(0);
    await scheduler.stop();
  }, 120_000);
});
