import type { JobEvent } from "../../lib/gpu-protocol";
import {
  applyJobEvent,
  cancelJob,
  confirmPlacement,
  expireQueued,
  failUnreported,
  failUnstorable,
  gpuSecondsUsed,
  JobPatch,
  JobState,
  loseNode,
  PREEMPTED_REASON,
  preempt,
  PublicStatus,
  refusePlacement,
  release,
  StoredStatus,
  unplace,
} from "../../services/gpu-scheduler/core/transitions";
import { PUBLIC_STATUS_TABLE, publicStatus, rangesShowing, showsAsSql, startedSql } from "../../services/gpu-scheduler/core/public-status";
import { categoriesShowingSql } from "../../services/gpu-scheduler/store/job-counters";

const T0 = new Date("2026-01-01T10:00:00.000Z");
const T1 = new Date("2026-01-01T10:00:05.000Z");
const T2 = new Date("2026-01-01T10:00:09.500Z");
/** The scheduler's clock when it applies an event. */
const NOW = new Date("2026-01-01T10:00:30.000Z");

const base: JobState = {
  status: "running",
  nodeId: "node-a",
  gpuUuid: "GPU-1",
  holding: true,
  assignedAt: T0,
  startedAt: T1,
  completedAt: null,
  exitCode: null,
  output: null,
  errorMessage: null,
};
const job = (over: Partial<JobState>): JobState => ({ ...base, ...over });
const ids = { jobId: "6f1c2b8e-0000-4000-8000-000000000001", nodeId: "node-a", gpuUuid: "GPU-1", at: T2.toISOString() };
const startedAt = (at: Date | string): JobEvent => ({ type: "started", ...ids, at: typeof at === "string" ? at : at.toISOString() });
const started = startedAt(T1);
const ran = { startedAt: T1.toISOString() };
const finished = (exitCode: number, output = "done\n", over: Partial<JobEvent> = ran): JobEvent =>
  ({ type: "finished", ...ids, exitCode, output, ...over }) as JobEvent;
const failed: JobEvent = { type: "failed", ...ids, ...ran, errorMessage: "Job exceeded the time limit of 5 s", exitCode: null, output: "" };
/** What a node reports for a job whose image could not be pulled: no start. */
const failedToStart: JobEvent = { type: "failed", ...ids, errorMessage: "Container image 'x' could not be pulled", exitCode: null, output: "" };
const cancelled: JobEvent = { type: "cancelled", ...ids, ...ran, exitCode: 143, output: "partial" };
const cancelledBeforeStart: JobEvent = { type: "cancelled", ...ids, exitCode: null, output: "" };
/** Taken by its node (run answered), its process or container not started yet (pulling its image). */
const taken = job({ startedAt: null });

type Case = { name: string; job: JobState; event: JobEvent; patch: JobPatch | null; cancelOnNode?: boolean };

const cases: Case[] = [
  {
    name: "started on a placed job: running, with the node's start time",
    job: job({ status: "assigned", startedAt: null }),
    event: started,
    patch: { status: "running", startedAt: T1 },
  },
  {
    name: "started on a job its node took (image pulled meanwhile): the start time is the node's, not the run answer's",
    job: taken,
    event: started,
    patch: { startedAt: T1 },
  },
  {
    name: "started again for a job whose start is known (a restarted node adopting its container): nothing moves",
    job: job({}),
    event: startedAt(T2),
    patch: null,
  },
  {
    name: "started stamped before the placement (node clock behind): the placement time",
    job: taken,
    event: startedAt("2026-01-01T09:59:00.000Z"),
    patch: { startedAt: T0 },
  },
  {
    name: "started stamped in the future (node clock ahead): now",
    job: taken,
    event: startedAt("2026-01-01T10:05:00.000Z"),
    patch: { startedAt: NOW },
  },
  {
    name: "finished with exit 0: completed, result kept, card free",
    job: job({}),
    event: finished(0),
    patch: { status: "completed", completedAt: T2, exitCode: 0, output: "done\n", holding: false, errorMessage: null },
  },
  {
    name: "finished with exit 3: failed with the exit code in errorMessage, result kept",
    job: job({}),
    event: finished(3, "boom"),
    patch: { status: "failed", completedAt: T2, exitCode: 3, output: "boom", holding: false, errorMessage: "Command exited with code 3" },
  },
  {
    name: "finished before started was applied: completes from assigned, start time taken from the event's startedAt",
    job: job({ status: "assigned", startedAt: null }),
    event: finished(0),
    patch: { status: "completed", startedAt: T1, completedAt: T2, exitCode: 0, output: "done\n", holding: false, errorMessage: null },
  },
  {
    name: "failed by the node after starting (time limit): failed with its message, result kept",
    job: job({}),
    event: failed,
    patch: { status: "failed", completedAt: T2, exitCode: null, output: "", holding: false, errorMessage: "Job exceeded the time limit of 5 s" },
  },
  {
    name: "failed before starting (image not pulled): failed with its message, no start time, no result",
    job: taken,
    event: failedToStart,
    patch: { status: "failed", completedAt: T2, holding: false, errorMessage: "Container image 'x' could not be pulled" },
  },
  {
    name: "failed before starting, its run answer not applied yet: the same",
    job: job({ status: "assigned", startedAt: null }),
    event: failedToStart,
    patch: { status: "failed", completedAt: T2, holding: false, errorMessage: "Container image 'x' could not be pulled" },
  },
  {
    name: "cancelled by the node on a running job: cancelled",
    job: job({}),
    event: cancelled,
    patch: { status: "cancelled", completedAt: T2, exitCode: 143, output: "partial", holding: false, errorMessage: null },
  },
  {
    name: "cancelled by the node before the job started: cancelled, no start time, no result",
    job: taken,
    event: cancelledBeforeStart,
    patch: { status: "cancelled", completedAt: T2, holding: false, errorMessage: null },
  },
  {
    name: "duplicate finished on a completed job: nothing changes",
    job: job({ status: "completed", holding: false, completedAt: T2, exitCode: 0, output: "done\n" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "late finished on a job the client cancelled: status stays, card freed, output kept for the logs",
    job: job({ status: "cancelled", completedAt: T2 }),
    event: finished(0, "all of it"),
    patch: { holding: false, exitCode: 0, output: "all of it" },
  },
  {
    name: "late finished on a job cancelled before its start was known: the start is recorded, no later than the cancel",
    job: job({ status: "cancelled", startedAt: null, completedAt: T1 }),
    event: finished(0, "all of it", { startedAt: T2.toISOString() }),
    patch: { startedAt: T1, holding: false, exitCode: 0, output: "all of it" },
  },
  {
    name: "cancelled event for a job cancelled while its image was pulled: only frees the card (no result)",
    job: job({ status: "cancelled", startedAt: null, completedAt: T2 }),
    event: cancelledBeforeStart,
    patch: { holding: false },
  },
  {
    name: "cancelled event after a cancel whose output is already kept: only frees the card",
    job: job({ status: "cancelled", completedAt: T2, exitCode: 0, output: "x" }),
    event: cancelled,
    patch: { holding: false },
  },
  {
    name: "finished on a job failed because its node was lost: terminal, nothing changes",
    job: job({ status: "failed", holding: false, completedAt: T2, errorMessage: "GPU node node-a was lost" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "started on a job failed because its node was lost: the node must stop it",
    job: job({ status: "failed", holding: false, completedAt: T2, errorMessage: "GPU node node-a was lost" }),
    event: started,
    patch: null,
    cancelOnNode: true,
  },
  {
    name: "started on a job cancelled while its image was pulled: the start is recorded up to the cancel; the node must stop it",
    job: job({ status: "cancelled", startedAt: null, completedAt: T1 }),
    event: startedAt(T2),
    patch: { startedAt: T1 },
    cancelOnNode: true,
  },
  {
    name: "started arriving after finished: nothing, and no stop (the node already ended it)",
    job: job({ status: "completed", holding: false, completedAt: T2, exitCode: 0, output: "" }),
    event: started,
    patch: null,
  },
  {
    name: "started from a node the job is no longer placed on: stopped there",
    job: job({ status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null }),
    event: started,
    patch: null,
    cancelOnNode: true,
  },
  {
    name: "finished from another node than the placement: ignored",
    job: job({ nodeId: "node-b" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "finished on another card of the same node: ignored",
    job: job({ gpuUuid: "GPU-2" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "an end reported with a clock behind the start: completedAt is never before startedAt",
    job: job({ startedAt: new Date("2026-01-01T10:00:20.000Z") }),
    event: finished(0),
    patch: {
      status: "completed",
      completedAt: new Date("2026-01-01T10:00:20.000Z"),
      exitCode: 0,
      output: "done\n",
      holding: false,
      errorMessage: null,
    },
  },
  {
    name: "an end stamped in the future (node clock ahead): completedAt is now",
    job: job({}),
    event: { ...finished(0), at: "2026-01-01T11:00:00.000Z" },
    patch: { status: "completed", completedAt: NOW, exitCode: 0, output: "done\n", holding: false, errorMessage: null },
  },
];

describe("gpu-scheduler transitions - job events", () => {
  test.each(cases)("$name", ({ job, event, patch, cancelOnNode = false }) => {
    const outcome = applyJobEvent(job, event, NOW);
    expect(outcome.patch).toEqual(patch);
    expect(outcome.cancelOnNode).toBe(cancelOnNode);
  });

  test("gpu-scheduler transitions - applying every event twice changes nothing the second time", () => {
    for (const c of cases) {
      const first = applyJobEvent(c.job, c.event, NOW);
      const after = { ...c.job, ...(first.patch ?? {}) } as JobState;
      expect(applyJobEvent(after, c.event, NOW).patch).toBeNull();
    }
  });

  test("gpu-scheduler transitions - no event moves a terminal job to another status", () => {
    for (const status of ["completed", "failed", "cancelled"] as const) {
      for (const event of [started, finished(0), finished(1), failed, cancelled]) {
        const patch = applyJobEvent(job({ status, completedAt: T2 }), event, NOW).patch;
        expect(patch?.status).toBeUndefined();
      }
    }
  });
});

describe("gpu-scheduler transitions - cancel", () => {
  test.each([
    ["queued", { status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null }, false],
    ["placed (assigned)", { status: "assigned", startedAt: null }, true],
    ["running", { status: "running" }, true],
  ] as const)("gpu-scheduler transitions - a %s job is cancelled at once", (_name, over, stopOnNode) => {
    const outcome = cancelJob(job(over as Partial<JobState>), T2);
    expect(outcome).toEqual({ ok: true, patch: { status: "cancelled", completedAt: T2 }, stopOnNode });
  });

  test.each(["completed", "failed", "cancelled"] as const)("gpu-scheduler transitions - a %s job cannot be cancelled", (status) => {
    expect(cancelJob(job({ status, holding: false }), T2)).toEqual({ ok: false, reason: "finished" });
  });
});

// Every other transition: (job, what happened on node-a) → patch. Node-a is where `base` is placed.
type Row = { name: string; job: JobState; patch: JobPatch | null; apply: (job: JobState) => JobPatch | null };
const MSG = "GPU node node-a was lost";
const placed = job({ status: "assigned", startedAt: null });
const queued = job({ status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null });
const cancelledHolding = job({ status: "cancelled", completedAt: T1 });
const completedFree = job({ status: "completed", holding: false, completedAt: T2, exitCode: 0, output: "" });
const completedHolding = job({ status: "completed", completedAt: T2, exitCode: 0, output: "" });
const backToQueue: JobPatch = { status: "queued", nodeId: null, gpuUuid: null, holding: false };
const failedOnCard: JobPatch = { status: "failed", errorMessage: MSG, completedAt: T2, holding: false };

const EXPIRED = "Queue timeout expired: not started within 30 s of submission";
const rows: Row[] = [
  // expireQueued: queued → cancelled once its queueTimeoutSeconds passed (housekeeping checked the deadline)
  {
    name: "expireQueued - a queued job is cancelled, saying its queue timeout expired",
    apply: (j) => expireQueued(j, 30, T2),
    job: queued,
    patch: { status: "cancelled", completedAt: T2, statusReason: EXPIRED },
  },
  { name: "expireQueued - a job placed meanwhile is left to start", apply: (j) => expireQueued(j, 30, T2), job: placed, patch: null },
  { name: "expireQueued - a running job is left alone", apply: (j) => expireQueued(j, 30, T2), job: job({}), patch: null },
  { name: "expireQueued - an ended job is left alone", apply: (j) => expireQueued(j, 30, T2), job: completedFree, patch: null },
  // confirmPlacement: the node took the job (run call answered, heartbeat); its start comes with its started event
  {
    name: "confirmPlacement - a placed job is the node's now, with no start time yet (it may pull its image first)",
    apply: (j) => confirmPlacement(j, "node-a"),
    job: placed,
    patch: { status: "running" },
  },
  { name: "confirmPlacement - a job already running: nothing", apply: (j) => confirmPlacement(j, "node-a"), job: job({}), patch: null },
  { name: "confirmPlacement - a job cancelled meanwhile: nothing", apply: (j) => confirmPlacement(j, "node-a"), job: cancelledHolding, patch: null },
  { name: "confirmPlacement - placed on another node: nothing", apply: (j) => confirmPlacement(j, "node-b"), job: placed, patch: null },
  // unplace: the node did not take it
  { name: "unplace - a placed job goes back to the queue, card free", apply: (j) => unplace(j, "node-a"), job: placed, patch: backToQueue },
  { name: "unplace - a job cancelled meanwhile only frees its card", apply: (j) => unplace(j, "node-a"), job: cancelledHolding, patch: { holding: false } },
  { name: "unplace - a running job: nothing", apply: (j) => unplace(j, "node-a"), job: job({}), patch: null },
  { name: "unplace - placed on another node: nothing", apply: (j) => unplace(j, "node-b"), job: placed, patch: null },
  { name: "unplace - already back in the queue: nothing", apply: (j) => unplace(j, "node-a"), job: queued, patch: null },
  // refusePlacement: the node refused it for good
  { name: "refusePlacement - a placed job fails with the reason", apply: (j) => refusePlacement(j, "node-a", MSG, T2), job: placed, patch: failedOnCard },
  {
    name: "refusePlacement - a job cancelled meanwhile only frees its card",
    apply: (j) => refusePlacement(j, "node-a", MSG, T2),
    job: cancelledHolding,
    patch: { holding: false },
  },
  { name: "refusePlacement - a running job: nothing", apply: (j) => refusePlacement(j, "node-a", MSG, T2), job: job({}), patch: null },
  { name: "refusePlacement - placed on another node: nothing", apply: (j) => refusePlacement(j, "node-b", MSG, T2), job: placed, patch: null },
  // release: the node confirmed the card free
  { name: "release - an ended job frees its card", apply: (j) => release(j, "node-a"), job: completedHolding, patch: { holding: false } },
  { name: "release - a cancelled job frees its card", apply: (j) => release(j, "node-a"), job: cancelledHolding, patch: { holding: false } },
  { name: "release - a running job keeps its card", apply: (j) => release(j, "node-a"), job: job({}), patch: null },
  { name: "release - card already free: nothing", apply: (j) => release(j, "node-a"), job: completedFree, patch: null },
  { name: "release - from another node: nothing", apply: (j) => release(j, "node-b"), job: completedHolding, patch: null },
  // loseNode: the node left the cluster
  { name: "loseNode - a running job fails", apply: (j) => loseNode(j, "node-a", MSG, T2), job: job({}), patch: failedOnCard },
  {
    name: "loseNode - a job its node had not started yet fails, with no start time",
    apply: (j) => loseNode(j, "node-a", MSG, T2),
    job: taken,
    patch: failedOnCard,
  },
  { name: "loseNode - a placed job goes back to the queue", apply: (j) => loseNode(j, "node-a", MSG, T2), job: placed, patch: backToQueue },
  { name: "loseNode - an ended job frees its card", apply: (j) => loseNode(j, "node-a", MSG, T2), job: completedHolding, patch: { holding: false } },
  { name: "loseNode - an ended job with its card free: nothing", apply: (j) => loseNode(j, "node-a", MSG, T2), job: completedFree, patch: null },
  { name: "loseNode - a job on another node: nothing", apply: (j) => loseNode(j, "node-b", MSG, T2), job: job({}), patch: null },
  // failUnreported: the live node no longer lists a running job
  { name: "failUnreported - a running job fails", apply: (j) => failUnreported(j, "node-a", MSG, T2), job: job({}), patch: failedOnCard },
  { name: "failUnreported - a placed job: nothing", apply: (j) => failUnreported(j, "node-a", MSG, T2), job: placed, patch: null },
  { name: "failUnreported - an ended job: nothing", apply: (j) => failUnreported(j, "node-a", MSG, T2), job: completedHolding, patch: null },
  { name: "failUnreported - on another node: nothing", apply: (j) => failUnreported(j, "node-b", MSG, T2), job: job({}), patch: null },
  // failUnstorable: a report that cannot be stored
  { name: "failUnstorable - a running job fails, card free", apply: (j) => failUnstorable(j, "node-a", MSG, T2), job: job({}), patch: failedOnCard },
  { name: "failUnstorable - a placed job fails, card free", apply: (j) => failUnstorable(j, "node-a", MSG, T2), job: placed, patch: failedOnCard },
  {
    name: "failUnstorable - a cancelled job keeps its status and end time, card free",
    apply: (j) => failUnstorable(j, "node-a", MSG, T2),
    job: cancelledHolding,
    patch: { holding: false, completedAt: T1 },
  },
  { name: "failUnstorable - card already free: nothing", apply: (j) => failUnstorable(j, "node-a", MSG, T2), job: completedFree, patch: null },
  { name: "failUnstorable - on another node: nothing", apply: (j) => failUnstorable(j, "node-b", MSG, T2), job: job({}), patch: null },
];

describe("gpu-scheduler transitions - placement, node loss and housekeeping", () => {
  test.each(rows)("gpu-scheduler transitions - $name", ({ job, patch, apply }) => {
    expect(apply(job)).toEqual(patch);
  });

  test("gpu-scheduler transitions - each of them applied twice changes nothing the second time", () => {
    for (const r of rows) {
      const first = r.apply(r.job);
      if (!first) continue;
      expect(r.apply({ ...r.job, ...first } as JobState)).toBeNull();
    }
  });

  test("gpu-scheduler transitions - none of them moves a terminal job to another status", () => {
    for (const r of rows.filter((r) => ["completed", "failed", "cancelled"].includes(r.job.status))) {
      expect(r.apply(r.job)?.status).toBeUndefined();
    }
  });
});

describe("gpu-scheduler transitions - views", () => {
  test("gpu-scheduler transitions - gpuSecondsUsed grows while running and stops at completion", () => {
    const running = { status: "running" as const, startedAt: T0, completedAt: null };
    expect(gpuSecondsUsed(running, T1)).toBe(5);
    expect(gpuSecondsUsed(running, T2)).toBe(9.5);
    expect(gpuSecondsUsed({ status: "completed", startedAt: T0, completedAt: T1 }, T2)).toBe(5);
    expect(gpuSecondsUsed({ status: "queued", startedAt: null, completedAt: null }, T2)).toBe(0);
    expect(gpuSecondsUsed({ status: "cancelled", startedAt: null, completedAt: T1 }, T2)).toBe(0);
    expect(gpuSecondsUsed({ status: "running", startedAt: null, completedAt: null }, T2)).toBe(0); // its image still being pulled
    expect(gpuSecondsUsed({ status: "failed", startedAt: null, completedAt: T2 }, T2)).toBe(0); // failed before it started
  });

  test("gpu-scheduler transitions - a job looks queued to clients until it has started (placed, or its image being pulled)", () => {
    expect(publicStatus("assigned", null)).toBe("queued");
    expect(publicStatus("running", null)).toBe("queued");
    expect(publicStatus("running", T1)).toBe("running");
    expect(publicStatus("failed", null)).toBe("failed");
  });
});

describe("gpu-scheduler transitions - public status table", () => {
  test.each<[StoredStatus, Date | null, PublicStatus]>([
    ["waiting", null, "queued"], // its dependencies do not all hold yet
    ["queued", null, "queued"],
    ["queued", T1, "queued"], // a retry waiting in the queue after a start
    ["assigned", null, "queued"],
    ["running", null, "queued"],
    ["running", T1, "running"],
    ["completed", T1, "completed"],
    ["failed", null, "failed"],
    ["cancelled", null, "cancelled"],
    ["cancelled", T1, "cancelled"],
  ])("gpu-scheduler transitions - stored %s with start %s shows as %s", (stored, startedAt, shows) => {
    expect(publicStatus(stored, startedAt)).toBe(shows);
  });

  test.each<[PublicStatus, object[], string, string]>([
    [
      "queued",
      [{ stored: "waiting" }, { stored: "queued" }, { stored: "assigned" }, { stored: "running", started: false }],
      "((j.status = 'waiting') OR (j.status = 'queued') OR (j.status = 'assigned') OR (j.status = 'running' AND j.started_at IS NULL))",
      "('waiting', 'queued', 'assigned')",
    ],
    ["running", [{ stored: "running", started: true }], "(j.status = 'running' AND j.started_at IS NOT NULL)", "('running')"],
    ["completed", [{ stored: "completed" }], "(j.status = 'completed')", "('completed')"],
    ["failed", [{ stored: "failed" }], "(j.status = 'failed')", "('failed')"],
    ["cancelled", [{ stored: "cancelled" }], "(j.status = 'cancelled')", "('cancelled')"],
  ])("gpu-scheduler transitions - %s: its stored ranges, its SQL condition and its counted categories", (status, ranges, sql, categories) => {
    expect(rangesShowing(status)).toEqual(ranges);
    expect(showsAsSql(status, "j")).toBe(sql);
    expect(categoriesShowingSql(status)).toBe(categories);
  });

  test("gpu-scheduler transitions - a range's start condition, with and without a table alias", () => {
    expect(startedSql({ stored: "running", started: false })).toBe("started_at IS NULL");
    expect(startedSql({ stored: "running", started: true }, "j")).toBe("j.started_at IS NOT NULL");
    expect(startedSql({ stored: "assigned" }, "j")).toBeUndefined();
    expect(showsAsSql("completed")).toBe("(status = 'completed')");
  });

  test("gpu-scheduler transitions - every stored status and start shows as exactly one public status", () => {
    const stored: StoredStatus[] = ["queued", "assigned", "running", "completed", "failed", "cancelled"];
    for (const s of stored)
      for (const started of [false, true]) {
        const rows = PUBLIC_STATUS_TABLE.filter((r) => r.stored === s && (r.started ?? started) === started);
        expect(rows).toHaveLength(1);
      }
  });
});

describe("gpu-scheduler transitions - retries", () => {
  /** Attempt `attempts` of a job allowing `maxRetries`, running on node-a. */
  const attempt = (attempts: number, maxRetries: number, over: Partial<JobState> = {}) => job({ attempts, maxRetries, ...over });
  const at = (s: number) => new Date(NOW.getTime() + s * 1000);
  const requeued = { status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null, completedAt: null, exitCode: null, output: null };
  const exit1 = finished(1, "boom\n");
  const lostMsg = "GPU node node-a was lost (no heartbeat for 10 s)";
  type RetryRow = { name: string; job: JobState; apply: (j: JobState) => JobPatch | null; retry: { reason: string; notBefore: Date } | null };
  /** The event of the job's current attempt. */
  const onEvent =
    (event: JobEvent, backoffS = 5) =>
    (j: JobState) =>
      applyJobEvent(j, { ...event, attempt: j.attempts }, NOW, backoffS).patch;
  const retryRows: RetryRow[] = [
    {
      name: "a non-zero exit with retries left goes back to the queue after the backoff",
      job: attempt(1, 2),
      apply: onEvent(exit1),
      retry: { reason: "retry 1 of 2 in 5 s after: exit code 1", notBefore: at(5) },
    },
    {
      name: "the backoff doubles with each attempt (RETRY_BACKOFF_S × 2^(attempt−1))",
      job: attempt(2, 3),
      apply: onEvent(exit1),
      retry: { reason: "retry 2 of 3 in 10 s after: exit code 1", notBefore: at(10) },
    },
    {
      name: "the backoff follows RETRY_BACKOFF_S",
      job: attempt(3, 3),
      apply: onEvent(exit1, 2),
      retry: { reason: "retry 3 of 3 in 8 s after: exit code 1", notBefore: at(8) },
    },
    {
      name: "a container that could not start is retried",
      job: attempt(1, 1, { startedAt: null }),
      apply: onEvent(failedToStart),
      retry: { reason: "retry 1 of 1 in 5 s after: Container image 'x' could not be pulled", notBefore: at(5) },
    },
    {
      name: "a lost node's running job is retried",
      job: attempt(1, 1),
      apply: (j) => loseNode(j, "node-a", lostMsg, NOW, 5),
      retry: { reason: "retry 1 of 1 in 5 s after: its GPU node was lost", notBefore: at(5) },
    },
    {
      name: "a job its node stopped listing is retried",
      job: attempt(1, 1),
      apply: (j) => failUnreported(j, "node-a", "gone", NOW, 5),
      retry: { reason: "retry 1 of 1 in 5 s after: its GPU node no longer ran the job", notBefore: at(5) },
    },
    { name: "the last allowed attempt fails for good (attempts > maxRetries)", job: attempt(3, 2), apply: onEvent(exit1), retry: null },
    { name: "no retries asked for: fails as before", job: attempt(1, 0), apply: onEvent(exit1), retry: null },
    { name: "the time limit is never retried", job: attempt(1, 5), apply: onEvent(failed), retry: null },
    { name: "a cancelled attempt is never retried", job: attempt(1, 5), apply: onEvent(cancelled), retry: null },
    {
      name: "a job cancelled while running is never retried when its end arrives",
      job: attempt(1, 5, { status: "cancelled" }),
      apply: onEvent(exit1),
      retry: null,
    },
    { name: "a successful attempt completes", job: attempt(1, 5), apply: onEvent(finished(0)), retry: null },
    {
      name: "a refusal of the request is not retried (it would fail again)",
      job: attempt(1, 5, { status: "assigned", startedAt: null }),
      apply: (j) => refusePlacement(j, "node-a", "bad", NOW),
      retry: null,
    },
  ];

  test.each(retryRows)("gpu-scheduler transitions - retries: $name", ({ job: j, apply, retry }) => {
    const patch = apply(j)!;
    if (!retry) {
      expect(patch.status).not.toBe("queued");
      expect(patch.endedAttempt).toBeUndefined();
      return;
    }
    expect(patch).toMatchObject({ ...requeued, statusReason: retry.reason, notBefore: retry.notBefore });
    expect(patch.endedAttempt).toMatchObject({ attempt: j.attempts, nodeId: "node-a" });
  });

  test("gpu-scheduler transitions - retries: the ended attempt keeps its exit code, output, start and error", () => {
    const patch = applyJobEvent(attempt(1, 2), exit1, NOW).patch!;
    expect(patch.endedAttempt).toEqual({
      attempt: 1,
      nodeId: "node-a",
      startedAt: T1,
      endedAt: T2,
      exitCode: 1,
      output: "boom\n",
      errorMessage: "Command exited with code 1",
    });
  });

  test("gpu-scheduler transitions - retries: a failure with no retry left says so", () => {
    expect(applyJobEvent(attempt(3, 2), { ...exit1, attempt: 3 }, NOW).patch).toMatchObject({
      status: "failed",
      statusReason: "no retry after attempt 3 of 3",
    });
    expect(applyJobEvent(attempt(1, 2), failed, NOW).patch).toMatchObject({
      status: "failed",
      errorMessage: "Job exceeded the time limit of 5 s",
      statusReason: "no retry after attempt 1 of 3 (the time limit is never retried)",
    });
  });

  test.each(["started", "finished", "failed", "cancelled"] as const)(
    "gpu-scheduler transitions - retries: a %s event of an earlier attempt changes nothing on the later one",
    (type) => {
      const events = { started, finished: exit1, failed, cancelled };
      const stale = { ...events[type], attempt: 1 } as JobEvent;
      for (const later of [attempt(2, 3), attempt(2, 3, { status: "assigned", startedAt: null }), attempt(2, 3, { startedAt: null })]) {
        expect(applyJobEvent(later, stale, NOW)).toEqual({ patch: null, cancelOnNode: false });
        // An event without an attempt comes from a node that runs first attempts only.
        expect(applyJobEvent(later, { ...stale, attempt: undefined } as JobEvent, NOW)).toEqual({ patch: null, cancelOnNode: false });
      }
      // The current attempt's own event applies.
      expect(applyJobEvent(attempt(2, 3, { status: "assigned", startedAt: null }), { ...events[type], attempt: 2 } as JobEvent, NOW).patch).not.toBeNull();
    },
  );

  test("gpu-scheduler transitions - retries: a retry that starts no longer says it waits", () => {
    const retried = attempt(2, 3, { status: "assigned", startedAt: null });
    expect(applyJobEvent(retried, { ...started, attempt: 2 }, NOW).patch).toEqual({ status: "running", startedAt: T1, statusReason: null });
  });

  test("gpu-scheduler transitions - retries: a placement the node never took gives its attempt back; a retried job is not queue-expired", () => {
    expect(unplace(attempt(2, 3, { status: "assigned", startedAt: null }), "node-a")).toEqual({ ...backToQueue, attempts: 1 });
    expect(loseNode(attempt(1, 3, { status: "assigned", startedAt: null }), "node-a", lostMsg, NOW)).toEqual({ ...backToQueue, attempts: 0 });
    const waiting = attempt(1, 3, { status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null });
    expect(expireQueued(waiting, 30, NOW)).toBeNull();
    expect(expireQueued({ ...waiting, attempts: 0 }, 30, NOW)).not.toBeNull();
  });
});

/** A running job with retries, as the preemption cases start from. */
const retried: JobState = { ...base, attempts: 1, maxRetries: 2 };
const preemptCancelled = (attempt: number): JobEvent => ({ ...cancelled, attempt });
const exitedOn = (attempt: number): JobEvent => ({ ...finished(1, "x"), attempt });

describe("gpu-scheduler preemption - transitions", () => {
  test("preempt: a running preemptible job is marked once; queued, ended or marked ones are not", () => {
    expect(preempt(retried)).toEqual({ preempting: true });
    expect(preempt({ ...retried, preempting: true })).toBeNull();
    expect(preempt({ ...retried, status: "queued", holding: false })).toBeNull();
    expect(preempt({ ...retried, status: "completed", holding: true })).toBeNull();
  });

  test("its node's cancelled event sends a preempted job back to the queue, preemptions + 1, the attempt kept, retries untouched", () => {
    const patch = applyJobEvent({ ...retried, preempting: true }, preemptCancelled(1), NOW).patch!;
    expect(patch).toMatchObject({
      status: "queued",
      holding: false,
      nodeId: null,
      preempting: false,
      preemptions: 1,
      statusReason: PREEMPTED_REASON,
      startedAt: null,
      exitCode: null,
    });
    expect(patch.endedAttempt).toMatchObject({ attempt: 1, errorMessage: PREEMPTED_REASON, exitCode: 143, output: "partial" });
    expect(patch.notBefore).toBeUndefined();
  });

  test("a client's cancel of an unmarked job stays a cancel", () => {
    expect(applyJobEvent(retried, preemptCancelled(1), NOW).patch).toMatchObject({ status: "cancelled" });
  });

  test("after two preemptions, a failure is retry 1 of 2 (attempt 3 counts as the first failure)", () => {
    const patch = applyJobEvent({ ...retried, attempts: 3, preemptions: 2 }, exitedOn(3), NOW).patch!;
    expect(patch.status).toBe("queued");
    expect(patch.statusReason).toMatch(/^retry 1 of 2/);
    expect(patch.endedAttempt!.attempt).toBe(3);
  });

  test("retries run out by failures, not by preemptions", () => {
    const patch = applyJobEvent({ ...retried, attempts: 5, preemptions: 2 }, exitedOn(5), NOW).patch!;
    expect(patch.status).toBe("failed");
    expect(patch.statusReason).toBe("no retry after attempt 3 of 3");
  });
});
