/**
 * The scheduler shell (services/gpu-scheduler/loop/scheduler.ts) against the real PostgreSQL: the
 * queue, placement commits with two replicas, events, cancel, node loss and dispatch failures.
 * gpu-node is replaced by a small in-memory NodeClient (the scheduler's narrow interface to it)
 * so the test controls exactly when each node answers; the real gpu-node is in the e2e tests.
 */
import { QueuePositions } from "../../services/gpu-scheduler/api/queue-positions";
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { checkJobEvent, JobEvent, NodeHeartbeat } from "../../lib/gpu-protocol";
import type { RunJobParams } from "../../lib/job-spec";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { PlacementRepository, QueuedRow } from "../../services/gpu-scheduler/store/placement.repository";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { UNSTORABLE_EVENT_MESSAGE } from "../../services/gpu-scheduler/loop/event-applier";
import { Clock, NodeClient, Scheduler } from "../../services/gpu-scheduler/loop/scheduler";
import { JobLogs, lastAttempt } from "../../services/gpu-scheduler/streams/job-logs";
import { toJobDetail } from "../../services/gpu-scheduler/api/job-view";
import { encodeOutput } from "../../lib/output-encoding";
import { dropDatabase, testDatabaseUrl, waitFor } from "../support/platform";

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} } as unknown as LoggerInstance;
const CLIENT = randomUUID();
const SETTINGS = { nodeTimeoutMs: 3000, dispatchTimeoutMs: 1000, warmUpMs: 0 };

/** A clock the test moves by hand. */
class ManualClock implements Clock {
  constructor(public ms = Date.parse("2026-01-01T00:00:00Z")) {}
  now = () => new Date(this.ms);
  advance(ms: number) {
    this.ms += ms;
  }
}

/** In-memory gpu-nodes: records every call; `onRun` decides how each run call answers. */
class FakeNodes implements NodeClient {
  runs: Array<RunJobParams & { nodeId: string }> = [];
  cancels: Array<{ nodeId: string; jobId: string }> = [];
  onCard = new Map<string, string>();
  doubleBookings = 0;
  onRun: (nodeId: string, params: RunJobParams) => Promise<void> = async () => undefined;

  async run(nodeId: string, params: RunJobParams) {
    this.runs.push({ ...params, nodeId });
    await this.onRun(nodeId, params);
    if (this.onCard.has(params.gpuUuid)) this.doubleBookings++;
    this.onCard.set(params.gpuUuid, params.jobId);
  }
  async cancel(nodeId: string, jobId: string) {
    this.cancels.push({ nodeId, jobId });
    const card = [...this.onCard].find(([, j]) => j === jobId)?.[0];
    if (card) this.onCard.delete(card);
    return { stopped: card !== undefined };
  }
  /** The job ends on its card (the card is free on the node before the event is sent). */
  finish(gpuUuid: string) {
    this.onCard.delete(gpuUuid);
  }
}

const heartbeat = (nodeId: string, cards: string[], runningJobIds: string[] = []): NodeHeartbeat => ({
  nodeId,
  cards: cards.map((uuid, index) => ({ uuid, index, name: "NVIDIA GeForce RTX 3060", memoryTotal: 12288, memoryUsed: 0, utilization: 0, temperature: 40 })),
  runningJobIds,
  executor: "process",
  at: new Date().toISOString(),
});

const event = (type: "started" | "finished", run: RunJobParams & { nodeId: string }, at: Date): JobEvent =>
  type === "started"
    ? { type, jobId: run.jobId, nodeId: run.nodeId, gpuUuid: run.gpuUuid, at: at.toISOString() }
    : // a job that ran: its node says when it started
      {
        type,
        jobId: run.jobId,
        nodeId: run.nodeId,
        gpuUuid: run.gpuUuid,
        at: at.toISOString(),
        startedAt: at.toISOString(),
        exitCode: 0,
        output: `out ${run.jobId}`,
      };

describe("gpu-scheduler queue - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pools: Pool[] = [];
  let repo: JobsRepository;
  let places: PlacementRepository;

  const newJob = async (gpuType: string | null = null, now = new Date()) => {
    const [row] = await repo.insert([{ id: randomUUID(), clientId: CLIENT, spec: { command: "true", gpuType, timeoutSeconds: 3600 } }], now);
    return row;
  };
  const statusOf = async (id: string) => (await repo.find(id))!.status;
  const replica = (nodes: NodeClient, clock: Clock = { now: () => new Date() }, pool = pools[0]) =>
    new Scheduler(new JobsRepository(pool), new PlacementRepository(pool), nodes, clock, quiet, SETTINGS);

  beforeAll(async () => {
    await ensureDatabase(url);
    pools = [newPool({ connectionString: url, max: 8 }), newPool({ connectionString: url, max: 8 })];
    // An idle connection closed by the server (the database dropped at the end) is not a failure.
    for (const pool of pools) pool.on("error", () => undefined);
    await migrate(pools[0], "gpu_scheduler", migrations);
    repo = new JobsRepository(pools[0]);
    places = new PlacementRepository(pools[0]);
  });
  beforeEach(async () => {
    await pools[0].query("TRUNCATE gpu_scheduler.jobs, gpu_scheduler.job_attempts, gpu_scheduler.account_usage");
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await dropDatabase(url);
  });

  test("gpu-scheduler queue - positions are 1-based in FIFO order and survive a new connection", async () => {
    const a = await newJob();
    const b = await newJob("RTX");
    const c = await newJob();
    const positions = new QueuePositions(repo, {
      limitsFor: (ids) => Promise.resolve(new Map(ids.map((id) => [id, { weight: 1, runningGpus: null, queuedJobs: 1000 }]))),
    });
    expect(await positions.of([a.id, b.id, c.id])).toEqual(new Map([a, b, c].map((j, i) => [j.id, i + 1])));
    const other = new JobsRepository(pools[1]);
    expect(await other.queueDepth()).toBe(3);
    const batch = await other.insert(
      [1, 2].map(() => ({ id: randomUUID(), clientId: CLIENT, spec: { command: "x", timeoutSeconds: 3600 } })),
      new Date(),
    );
    expect([...(await positions.of(batch.map((r) => r.id))).values()].sort()).toEqual([4, 5]);
  });

  test("gpu-scheduler queue - placement reads the oldest N queued jobs of each requested type, in FIFO order", async () => {
    const types = [null, "RTX 3060", null, "rtx  3060", "A100", null, "A100", "RTX 3060"];
    const ids: string[] = [];
    for (const t of types) ids.push((await newJob(t)).id);
    const snapshot = async (cardCount: number) => {
      let seen: QueuedRow[] = [];
      const outcome = await places.placeUnderLock(cardCount, ({ queue }) => ((seen = queue), []), new Date());
      expect(outcome).toEqual({ planned: 0, assigned: [] });
      return seen;
    };
    // Two cards, none busy: at most two jobs of each type can be placed.
    const window = await snapshot(2);
    // any: jobs 0 and 2; "rtx 3060" (same type written twice): 1 and 3; A100: 4 and 6.
    expect(window.map((j) => ids.indexOf(j.jobId))).toEqual([0, 1, 2, 3, 4, 6]);
    expect(window.map((j) => j.gpuType)).toEqual([null, "RTX 3060", null, "rtx  3060", "A100", "A100"]);
    expect(await snapshot(100)).toHaveLength(types.length);
    expect(await snapshot(0)).toEqual([]);
  });

  test("gpu-scheduler queue - a started job that ends adds its GPU-seconds to its account's usage, decayed when read; one that never started adds none", async () => {
    const halfLife = new JobsRepository(pools[0], 2); // seconds, so decay shows within the test
    const started = await newJob();
    const neverStarted = await newJob();
    await places.placeUnderLock(
      2,
      ({ queue }) => queue.map((q, i) => ({ jobId: q.jobId, nodeId: "n1", gpuUuid: `g${i}`, gpuUuids: [`g${i}`], gpuName: "Card" })),
      new Date(),
    );
    const seen = await halfLife.states([started.id, neverStarted.id]);
    const at = (id: string) => ({ ...seen.get(id)!, status: seen.get(id)!.status });
    const t0 = new Date(Date.now() - 10_000);
    expect(await halfLife.compareAndSet([{ id: started.id, seen: at(started.id), patch: { status: "running", startedAt: t0 } }])).toEqual(
      new Set([started.id]),
    );
    const running = (await halfLife.states([started.id])).get(started.id)!;
    const end = new Date(t0.getTime() + 8_000);
    const ended = await halfLife.compareAndSet([
      { id: started.id, seen: running, patch: { status: "completed", completedAt: end, exitCode: 0 } },
      { id: neverStarted.id, seen: at(neverStarted.id), patch: { status: "cancelled", completedAt: end } },
    ]);
    expect(ended.size).toBe(2);
    const { rows } = await pools[0].query("SELECT client_id, gpu_seconds FROM gpu_scheduler.account_usage");
    expect(rows).toEqual([{ client_id: CLIENT, gpu_seconds: 8 }]);
    // A job queued again for the account: its usage, decayed with the half-life (2 s) since it was added.
    const queued = await newJob();
    const [account] = (await halfLife.queueStanding([queued.id])).accounts;
    expect(account.clientId).toBe(CLIENT);
    expect(account.usage).toBeGreaterThan(0);
    expect(account.usage).toBeLessThanOrEqual(8);
    await waitFor(async () => (await halfLife.queueStanding([queued.id])).accounts[0].usage < 4, {
      timeoutMs: 10_000,
      message: "usage halved after a half-life",
    });
  });

  test("gpu-scheduler queue - a placement commit writes names and ids as literals safely", async () => {
    const { id } = await newJob();
    const odd = "node'); DROP TABLE gpu_scheduler.jobs; --";
    const outcome = await places.placeUnderLock(
      1,
      () => [{ jobId: id, nodeId: odd, gpuUuid: "g'1", gpuUuids: ["g'1"], gpuName: "Card \\ 'quoted'" }],
      new Date(),
    );
    expect(outcome.assigned).toEqual([
      {
        id,
        client_id: CLIENT,
        node_id: odd,
        gpu_uuid: "g'1",
        gpu_uuids: ["g'1"],
        spec: { command: "true", timeoutSeconds: 3600 },
        env: null,
        assigned_at: expect.any(Date),
        attempts: 1,
        max_retries: 0,
        array_id: null,
        array_index: null,
      },
    ]);
    expect(await repo.find(id)).toMatchObject({ status: "assigned", gpu_name: "Card \\ 'quoted'", holding: true });
  });

  test("gpu-scheduler queue - a placement pass keeps why each job it read waits", async () => {
    const nodes = new FakeNodes();
    nodes.onRun = () => new Promise(() => undefined); // the node never answers: the cards stay held
    const scheduler = replica(nodes);
    await scheduler.heartbeat(heartbeat("n1", ["a0", "a1"]));
    const placed = [(await newJob()).id, (await newJob()).id];
    const rtx = (await newJob("RTX")).id;
    const a100 = (await newJob("A100")).id;
    await scheduler.schedule({ newJob: true });
    for (const id of placed) expect(await statusOf(id)).toBe("assigned");
    expect(new Map([...scheduler.waiting].map(([id, w]) => [id, w.reason]))).toEqual(
      new Map([
        [rtx, "MATCHING_GPUS_BUSY"],
        [a100, "NO_MATCHING_GPU"],
      ]),
    );
    // Every card held: the next pass reads no job, so it knows no reason.
    await scheduler.schedule();
    expect(scheduler.waiting).toEqual(new Map());
  });

  test("gpu-scheduler queue - two replicas racing place every job once and never two on a card", async () => {
    const nodes = new FakeNodes();
    const replicas = [replica(nodes, undefined, pools[0]), replica(nodes, undefined, pools[1])];
    const hbs = [heartbeat("n1", ["a0", "a1", "a2"]), heartbeat("n2", ["b0", "b1", "b2"])];
    for (const r of replicas) for (const hb of hbs) await r.heartbeat(hb);
    // The node finishes each job soon after accepting it, reporting to either replica.
    const finish = async (jobId: string, gpuUuid: string) => {
      const run = nodes.runs.find((r) => r.jobId === jobId)!;
      const target = replicas[Math.floor(Math.random() * 2)];
      await target.applyEvent(event("started", run, new Date()));
      nodes.finish(gpuUuid);
      await replicas[Math.floor(Math.random() * 2)].applyEvent(event("finished", run, new Date()));
    };
    nodes.onRun = async (_nodeId, params) => {
      setTimeout(() => void finish(params.jobId, params.gpuUuid), Math.random() * 5);
    };
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      ids.push((await newJob()).id);
      void replicas[i % 2].schedule();
      void replicas[(i + 1) % 2].schedule();
    }
    await waitFor(async () => (await repo.countByStatus()).completed === 60, {
      timeoutMs: 20_000,
      message: "all 60 jobs completed",
      intervalMs: 50,
    }).catch(async (err) => {
      // Completions free cards; a pass per completion keeps the queue moving.
      throw new Error(`${err.message}: ${JSON.stringify(await repo.countByStatus())}`);
    });
    expect(nodes.runs).toHaveLength(60);
    expect(new Set(nodes.runs.map((r) => r.jobId))).toEqual(new Set(ids));
    expect(nodes.doubleBookings).toBe(0);
    await Promise.all(replicas.map((r) => r.stop()));
  });

  test("gpu-scheduler queue - a multi-card job holds every card it was given until it ends, and its seconds count times its cards", async () => {
    const nodes = new FakeNodes();
    const clock = new ManualClock();
    const s = replica(nodes, clock);
    await s.heartbeat(heartbeat("n1", ["a0", "a1", "a2", "a3"]));
    const insert = (gpuCount: number) =>
      repo.insert([{ id: randomUUID(), clientId: CLIENT, spec: { command: "true", timeoutSeconds: 3600, gpuCount } }], clock.now());
    const [gang] = await insert(2);
    const [single] = await insert(1);
    const [second] = await insert(2);
    await s.schedule();
    await waitFor(async () => (await statusOf(gang.id)) === "running" && (await statusOf(single.id)) === "running", { message: "gang and single running" });
    const gangRun = nodes.runs.find((r) => r.jobId === gang.id)!;
    expect(gangRun.gpuUuids).toHaveLength(2);
    expect(gangRun.gpuUuid).toBe(gangRun.gpuUuids![0]);
    expect(await repo.find(gang.id)).toMatchObject({ gpu_count: 2, gpu_uuids: gangRun.gpuUuids, gpu_uuid: gangRun.gpuUuid, holding: true });
    // Every card of every holding job is held, and the account holds three.
    const singleCard = nodes.runs.find((r) => r.jobId === single.id)!.gpuUuid;
    expect([...(await places.heldCards())].sort()).toEqual([...gangRun.gpuUuids!, singleCard].sort());
    let seen: { held: string[]; heldBy?: Map<string, number> } | undefined;
    await places.placeUnderLock(4, (snapshot) => ((seen = { held: [...snapshot.held], heldBy: snapshot.heldBy }), []), clock.now());
    expect(seen!.held.sort()).toEqual([...gangRun.gpuUuids!, singleCard].sort());
    expect(seen!.heldBy!.get(CLIENT)).toBe(3);
    expect(await statusOf(second.id)).toBe("queued"); // one card free: the second gang waits
    expect(s.waiting.get(second.id)).toMatchObject({ reason: "MATCHING_GPUS_BUSY", needed: 2 });

    const startedAt = new Date(clock.ms + 1000);
    clock.advance(10_000); // a node's times count only up to the scheduler's now
    await s.applyEvent({ type: "started", jobId: gang.id, nodeId: "n1", gpuUuid: gangRun.gpuUuid, at: startedAt.toISOString() });
    const endedAt = new Date(startedAt.getTime() + 8000);
    // The cards are free on the node before its event is sent (a pass the event triggers may place on them at once).
    for (const uuid of gangRun.gpuUuids!) nodes.finish(uuid);
    await s.applyEvent({
      type: "finished",
      jobId: gang.id,
      nodeId: "n1",
      gpuUuid: gangRun.gpuUuid,
      at: endedAt.toISOString(),
      startedAt: startedAt.toISOString(),
      exitCode: 0,
      output: "",
    });
    const done = (await repo.find(gang.id))!;
    expect(toJobDetail(done, clock.now(), (n) => n, 3600)).toMatchObject({ status: "completed", gpuCount: 2, gpuSecondsUsed: 16 });
    const { rows } = await pools[0].query("SELECT gpu_seconds FROM gpu_scheduler.account_usage WHERE client_id = $1", [CLIENT]);
    expect(rows).toEqual([{ gpu_seconds: 16 }]);
    // Both cards are free again: the second gang gets them.
    await s.schedule();
    await waitFor(async () => (await statusOf(second.id)) === "running", { message: "the second gang on the freed cards" });
    expect(nodes.runs.find((r) => r.jobId === second.id)!.gpuUuids!.sort()).toEqual([...gangRun.gpuUuids!].sort());
    expect(nodes.doubleBookings).toBe(0);
    await s.stop();
  });

  test("gpu-scheduler queue - events apply once: duplicates and late events change nothing", async () => {
    const nodes = new FakeNodes();
    const s = replica(nodes);
    await s.heartbeat(heartbeat("n1", ["a0"]));
    const { id } = await newJob();
    await s.schedule();
    await waitFor(async () => (await statusOf(id)) === "running", { message: "job running" });
    const run = nodes.runs[0];
    const done = event("finished", run, new Date());
    await s.applyEvent(done);
    const after = await repo.find(id);
    expect(after).toMatchObject({ status: "completed", exit_code: 0, output: `out ${id}`, holding: false });
    await s.applyEvent(done);
    await s.applyEvent(event("started", run, new Date(Date.now() + 60_000)));
    await s.applyEvent({ ...done, type: "failed", errorMessage: "late", exitCode: null } as JobEvent);
    expect(await repo.find(id)).toEqual(after);
    await s.stop();
  });

  test("gpu-scheduler queue - cancel: queued at once, running stopped on its node and its card freed", async () => {
    const nodes = new FakeNodes();
    const s = replica(nodes);
    await s.heartbeat(heartbeat("n1", ["a0"]));
    const running = await newJob();
    await s.schedule();
    await waitFor(async () => (await statusOf(running.id)) === "running", { message: "job running" });
    const queued = await newJob();
    await s.schedule();
    expect(await statusOf(queued.id)).toBe("queued");

    expect(await s.cancel((await repo.find(queued.id))!)).toBe(true);
    expect(await repo.find(queued.id)).toMatchObject({ status: "cancelled", holding: false });
    expect(nodes.cancels).toEqual([]);

    expect(await s.cancel((await repo.find(running.id))!)).toBe(true);
    expect(nodes.cancels).toEqual([{ nodeId: "n1", jobId: running.id }]);
    expect(await repo.find(running.id)).toMatchObject({ status: "cancelled", holding: false });
    expect(await s.cancel((await repo.find(running.id))!)).toBe(false);

    // The card is free again: the next job runs on it.
    const next = await newJob();
    await s.schedule();
    await waitFor(async () => (await statusOf(next.id)) === "running", { message: "next job running on the freed card" });
    await s.stop();
  });

  test("gpu-scheduler queue - node lost: running jobs fail, placements go back to the queue in their place", async () => {
    const clock = new ManualClock();
    const nodes = new FakeNodes();
    let hang!: (err: Error) => void;
    nodes.onRun = (_n, params) => (params.command === "hang" ? new Promise((_, reject) => (hang = reject)) : Promise.resolve());
    const s = replica(nodes, clock);
    await s.heartbeat(heartbeat("n1", ["a0", "a1"]));
    const first = await newJob(null, clock.now());
    await s.schedule();
    await waitFor(async () => (await statusOf(first.id)) === "running", { message: "first running" });
    // The second placement is never confirmed by the node.
    const [second] = await repo.insert([{ id: randomUUID(), clientId: CLIENT, spec: { command: "hang", timeoutSeconds: 3600 } }], clock.now());
    const third = await newJob(null, clock.now());
    await s.schedule();
    expect(await statusOf(second.id)).toBe("assigned");
    expect(await statusOf(third.id)).toBe("queued");

    clock.advance(SETTINGS.nodeTimeoutMs + 1);
    await s.tick();
    expect(await repo.find(first.id)).toMatchObject({ status: "failed", holding: false, error_message: expect.stringMatching(/GPU node n1 was lost/) });
    expect(await repo.find(second.id)).toMatchObject({ status: "queued", node_id: null, holding: false });
    expect(s.view.cards()).toEqual([]);
    hang(Object.assign(new Error("gone"), { name: "RequestTimeoutError", code: 504 }));

    // A new one-card node: the re-queued job goes first, as it arrived first.
    await s.heartbeat(heartbeat("n2", ["b0"]));
    await waitFor(async () => (await repo.find(second.id))!.node_id === "n2", { message: "second placed on n2" });
    expect(await statusOf(third.id)).toBe("queued");

    // Node loss by another replica, or twice, changes nothing more.
    clock.advance(SETTINGS.nodeTimeoutMs + 1);
    await s.tick();
    const failed = await repo.find(first.id);
    await s.tick();
    expect(await repo.find(first.id)).toEqual(failed);
    await s.stop();
  });

  test("gpu-scheduler queue - a node that returns and still runs a failed job is told to stop it", async () => {
    const clock = new ManualClock();
    const nodes = new FakeNodes();
    const s = replica(nodes, clock);
    await s.heartbeat(heartbeat("n1", ["a0"]));
    const job = await newJob(null, clock.now());
    await s.schedule();
    await waitFor(async () => (await statusOf(job.id)) === "running", { message: "running" });
    clock.advance(SETTINGS.nodeTimeoutMs + 1);
    await s.tick();
    expect(await statusOf(job.id)).toBe("failed");
    await s.heartbeat(heartbeat("n1", ["a0"], [job.id, "not-a-uuid"]));
    await waitFor(() => nodes.cancels.length === 2, { message: "two cancels" });
    expect(nodes.cancels.map((c) => c.jobId).sort()).toEqual([job.id, "not-a-uuid"].sort());
    await s.stop();
  });

  test("gpu-scheduler queue - a running job its live node stopped listing (node restarted) fails after 3 node timeouts", async () => {
    const clock = new ManualClock();
    const nodes = new FakeNodes();
    const s = replica(nodes, clock);
    await s.heartbeat(heartbeat("n1", ["a0", "a1"]));
    const [lost, kept] = [await newJob(null, clock.now()), await newJob(null, clock.now())];
    await s.schedule();
    await waitFor(async () => (await statusOf(lost.id)) === "running" && (await statusOf(kept.id)) === "running", { message: "both running" });
    // The node keeps beating but lists only one of them.
    for (let elapsed = 0; elapsed < 3 * SETTINGS.nodeTimeoutMs; elapsed += 1000) {
      await s.heartbeat(heartbeat("n1", ["a0", "a1"], [kept.id]));
      await s.tick();
      expect(await statusOf(lost.id)).toBe("running");
      clock.advance(1000);
    }
    await s.heartbeat(heartbeat("n1", ["a0", "a1"], [kept.id]));
    await s.tick();
    expect(await repo.find(lost.id)).toMatchObject({ status: "failed", holding: false, error_message: expect.stringMatching(/no longer runs the job/) });
    expect(await statusOf(kept.id)).toBe("running");
    await s.stop();
  });

  test("gpu-scheduler queue - an unreachable node gets the job back in the queue; a refusing node fails it", async () => {
    const nodes = new FakeNodes();
    let mode: "unreachable" | "refuse" | "ok" = "unreachable";
    nodes.onRun = async () => {
      if (mode === "unreachable") throw Object.assign(new Error("Service 'gpu-node.run' is not found"), { name: "ServiceNotFoundError", code: 404 });
      if (mode === "refuse") throw Object.assign(new Error("Parameters validation error!"), { name: "ValidationError", code: 422 });
    };
    const s = replica(nodes);
    await s.heartbeat(heartbeat("n1", ["a0"]));
    const job = await newJob();
    await s.schedule();
    await waitFor(async () => (await repo.find(job.id))!.status === "queued" && nodes.runs.length === 1, { message: "back in queue" });
    // Suspended until heard again: another pass places nothing.
    await s.schedule();
    expect(nodes.runs).toHaveLength(1);
    mode = "refuse";
    await s.heartbeat(heartbeat("n1", ["a0"]));
    await waitFor(async () => (await statusOf(job.id)) === "failed", { message: "refused job failed" });
    expect((await repo.find(job.id))!.error_message).toMatch(/refused/);
    mode = "ok";
    const next = await newJob();
    await s.schedule();
    await waitFor(async () => (await statusOf(next.id)) === "running", { message: "next job runs on the card" });
    await s.stop();
  });

  test("gpu-scheduler queue - a placement never confirmed (its replica died) is confirmed by heartbeat or re-queued", async () => {
    const clock = new ManualClock();
    const nodes = new FakeNodes();
    nodes.onRun = () => new Promise(() => undefined); // the dispatching replica "dies" mid-call
    const dying = replica(nodes, clock, pools[0]);
    const survivor = replica(new FakeNodes(), clock, pools[1]);
    for (const r of [dying, survivor]) await r.heartbeat(heartbeat("n1", ["a0", "a1"]));
    // The heartbeats started passes of their own: let them finish on the empty queue first,
    // so only `dying` places the jobs below.
    await Promise.all([dying.schedule(), survivor.schedule()]);
    const a = await newJob(null, clock.now());
    const b = await newJob(null, clock.now());
    await dying.schedule();
    expect([await statusOf(a.id), await statusOf(b.id)]).toEqual(["assigned", "assigned"]);

    clock.advance(2 * SETTINGS.dispatchTimeoutMs + 1);
    // The node reports it runs `a` (it got the call); it never got `b`.
    await survivor.heartbeat(heartbeat("n1", ["a0", "a1"], [a.id]));
    await survivor.tick();
    expect(await statusOf(a.id)).toBe("running");
    const bRow = await repo.find(b.id);
    // Re-queued, then placed again at once by the survivor's pass.
    expect(["queued", "assigned", "running"]).toContain(bRow!.status);
    await waitFor(async () => (await statusOf(b.id)) === "running", { message: "b running via the survivor" });
    await survivor.stop();
    await dying.stop();
  });

  /** Places one job per card of node n1 and waits until each runs; returns their runs. */
  async function runningJobs(s: Scheduler, nodes: FakeNodes, cards: string[]) {
    await s.heartbeat(heartbeat("n1", cards));
    const ids = [];
    for (const _ of cards) ids.push((await newJob()).id);
    await s.schedule();
    for (const id of ids) await waitFor(async () => (await statusOf(id)) === "running", { message: `job ${id} running` });
    return ids.map((id) => nodes.runs.find((r) => r.jobId === id)!);
  }

  test("gpu-scheduler queue - a job that printed NUL and invalid UTF-8 completes with its bytes kept losslessly", async () => {
    const nodes = new FakeNodes();
    const s = replica(nodes);
    const [run] = await runningJobs(s, nodes, ["a0"]);
    const bytes = Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0x0a]);
    const checked = checkJobEvent({ ...event("finished", run, new Date()), ...encodeOutput(bytes) });
    if (!checked.ok) throw new Error(`the event was refused at ${checked.field}`);
    await s.applyEvent(checked.value);
    const row = await repo.find(run.jobId);
    expect(row).toMatchObject({ status: "completed", holding: false, output: "ok\ufffd\ufffd\n" });
    expect(Buffer.from(row!.output_base64!, "base64").equals(bytes)).toBe(true);
    const page = await new JobLogs(
      { logPage: () => Promise.reject(new Error("node gone")), artifactsPage: () => Promise.reject(new Error("node gone")) },
      { has: () => true },
    ).first(lastAttempt(row!));
    expect(Buffer.from(page.data, "base64").equals(bytes)).toBe(true); // the logs fallback returns the raw bytes
    await s.stop();
  });

  test("gpu-scheduler queue - an event the database refuses fails its job and frees its card; the rest of the batch applies", async () => {
    const nodes = new FakeNodes();
    const s = replica(nodes);
    const [bad, good] = await runningJobs(s, nodes, ["a0", "a1"]);
    // A raw NUL straight past the shape check: jsonb refuses it, as it did before the guard.
    const unstorable = { ...event("finished", bad, new Date()), output: "x\u0000y" } as JobEvent;
    await Promise.all([s.applyEvent(unstorable), s.applyEvent(event("finished", good, new Date()))]);
    expect(await repo.find(bad.jobId)).toMatchObject({ status: "failed", holding: false, error_message: UNSTORABLE_EVENT_MESSAGE });
    expect(await repo.find(good.jobId)).toMatchObject({ status: "completed", holding: false, output: `out ${good.jobId}` });
    // The freed card takes the next job at once.
    const next = await newJob();
    await s.schedule();
    await waitFor(async () => (await statusOf(next.id)) === "running", { message: "the next job on the freed card" });
    await s.stop();
  });

  test("gpu-scheduler queue - an event given up after its last delivery fails its job and frees its card; one for another node changes nothing", async () => {
    const nodes = new FakeNodes();
    const s = replica(nodes);
    const [run] = await runningJobs(s, nodes, ["a0"]);
    const finished = event("finished", run, new Date());
    await s.giveUpOnEvent({ ...finished, nodeId: "n-other" }, new Error("boom"));
    expect(await repo.find(run.jobId)).toMatchObject({ status: "running", holding: true });
    await s.giveUpOnEvent(finished, new Error("boom"));
    expect(await repo.find(run.jobId)).toMatchObject({ status: "failed", holding: false, error_message: UNSTORABLE_EVENT_MESSAGE });
    await s.stop();
  });

  test("gpu-scheduler queue - retries: a failed attempt waits its backoff in the queue, then runs again as attempt 2 and completes; attempt 1 is kept", async () => {
    const clock = new ManualClock(Date.now());
    const nodes = new FakeNodes();
    const s = new Scheduler(repo, places, nodes, clock, quiet, { ...SETTINGS, retryBackoffS: 7 });
    await s.heartbeat(heartbeat("n-a", ["a0"]));
    const [row] = await repo.insert([{ id: randomUUID(), clientId: CLIENT, spec: { command: "false", timeoutSeconds: 3600, maxRetries: 2 } }], clock.now());
    await s.schedule({ newJob: true });
    await waitFor(async () => nodes.runs.length === 1, { message: "attempt 1 dispatched" });
    const first = nodes.runs[0];
    expect(first.attempt).toBe(1);
    await s.applyEvent({ ...event("started", first, clock.now()), attempt: 1 });
    clock.advance(2000); // attempt 1 runs 2 s
    nodes.finish("a0");
    const t = clock.now();
    await s.applyEvent({ ...event("finished", first, t), attempt: 1, exitCode: 1, output: "first try\n" } as JobEvent);
    expect(await repo.find(row.id)).toMatchObject({
      status: "queued",
      holding: false,
      node_id: null,
      attempts: 1,
      max_retries: 2,
      exit_code: null,
      output: null,
      started_at: null,
      status_reason: "retry 1 of 2 in 7 s after: exit code 1",
    });
    expect(await repo.attempt(row.id, 1)).toEqual({ attempt: 1, node_id: "n-a", exit_code: 1, output: "first try\n", output_base64: null });
    // Not placeable before the backoff ends, though the card is free.
    await s.schedule();
    expect(nodes.runs).toHaveLength(1);
    clock.advance(7000);
    await s.schedule();
    await waitFor(async () => nodes.runs.length === 2, { message: "attempt 2 dispatched" });
    const second = nodes.runs[1];
    expect(second).toMatchObject({ jobId: row.id, attempt: 2 });
    // A late report of attempt 1 changes nothing on attempt 2.
    await s.applyEvent({ ...event("finished", { ...second, attempt: 1 }, clock.now()), attempt: 1, exitCode: 3 } as JobEvent);
    expect(await repo.find(row.id)).toMatchObject({ status: expect.stringMatching(/^(assigned|running)$/), attempts: 2, exit_code: null });
    await s.applyEvent({ ...event("started", second, clock.now()), attempt: 2 });
    expect((await repo.find(row.id))!.status_reason).toBeNull();
    clock.advance(3000); // attempt 2 runs 3 s
    await s.applyEvent({ ...event("finished", second, clock.now()), attempt: 2 });
    expect(await repo.find(row.id)).toMatchObject({ status: "completed", attempts: 2, exit_code: 0, output: `out ${row.id}` });
    // The client used (and pays for) both attempts: 2 s + 3 s.
    expect(toJobDetail((await repo.find(row.id))!, clock.now(), (n) => n, 3600).gpuSecondsUsed).toBeCloseTo(5, 0);
    // Its account's fair-share usage counts both attempts too (the retry's compare-and-set adds attempt 1).
    const usage = await pools[0].query("SELECT gpu_seconds FROM gpu_scheduler.account_usage WHERE client_id = $1", [CLIENT]);
    expect(usage.rows[0].gpu_seconds).toBeCloseTo(5, 0);
    expect(await repo.attempt(row.id, 2)).toBeUndefined(); // the last attempt is the job's row
    await s.stop();
  });

  test("gpu-scheduler queue - logs come page by page from the node, and from the kept result once the node is gone", async () => {
    const nodes = new FakeNodes();
    const s = replica(nodes);
    const [run] = await runningJobs(s, nodes, ["a0"]);
    await s.applyEvent(event("finished", run, new Date()));
    const row = lastAttempt((await repo.find(run.jobId))!);
    const file = Buffer.from("0123456789");
    const asked: number[] = [];
    const logPage = async (_node: string, _job: string, offset: number) => {
      asked.push(offset);
      const end = Math.min(file.length, offset + 4);
      return { data: file.subarray(offset, end).toString("base64"), offset, nextOffset: end < file.length ? end : null, totalBytes: file.length };
    };
    let live = true;
    const logs = new JobLogs({ logPage, artifactsPage: logPage }, { has: () => live });
    let page = await logs.first(row);
    let text = Buffer.from(page.data, "base64").toString();
    while (page.next) {
      page = await logs.page(row, page.next.source as "node", page.next.offset as number);
      text += Buffer.from(page.data, "base64").toString();
    }
    expect(text).toBe("0123456789");
    expect(asked).toEqual([0, 4, 8]);
    live = false;
    const kept = await logs.first(row);
    expect(kept).toEqual({ data: Buffer.from(`out ${run.jobId}`).toString("base64"), next: null });
    await s.stop();
  });
});
