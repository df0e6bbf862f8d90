/** Job arrays and dependencies (issue 30): the pure decisions, as tables. */
import { type DependencyState, judgeDependencies } from "../../services/gpu-scheduler/core/dependencies";
import { plan, type Snapshot, type SnapshotCard } from "../../services/gpu-scheduler/core/placement";
import { publicStatus } from "../../services/gpu-scheduler/core/public-status";
import { cancelForDependency, cancelJob, type JobPatch, type JobState, releaseWaiting, stillWaiting } from "../../services/gpu-scheduler/core/transitions";
import { toArrayView } from "../../services/gpu-scheduler/api/array-actions";
import { DependencyResolver } from "../../services/gpu-scheduler/loop/dependency-resolver";
import type { JobWriter } from "../../services/gpu-scheduler/loop/job-writer";
import type { LoggerInstance } from "moleculer";

const card = (uuid: string, busy = false, nodeId = "n1"): SnapshotCard => ({ nodeId, uuid, name: "RTX", busy });
const cards = (n: number) => Array.from({ length: n }, (_, i) => card(`g${i}`));
const job = (jobId: string, seq: number, extra: Partial<Snapshot["queue"][number]> = {}) => ({ jobId, gpuType: null, seq, clientId: "a", ...extra });

describe("gpu-scheduler batch - arrayParallelism in plan", () => {
  const cases: Array<{ name: string; snapshot: Snapshot; placed: string[]; limited: string[] }> = [
    {
      name: "an array capped at 2 places 2 of its jobs on 4 free cards, the others wait with ARRAY_LIMIT",
      snapshot: { cards: cards(4), queue: [1, 2, 3, 4].map((i) => job(`x${i}`, i, { arrayId: "X" })), arrays: new Map([["X", { parallelism: 2, active: 0 }]]) },
      placed: ["x1", "x2"],
      limited: ["x3", "x4"],
    },
    {
      name: "jobs of the array already holding cards count: 1 active of 2 leaves one more",
      snapshot: { cards: cards(4), queue: [1, 2].map((i) => job(`x${i}`, i, { arrayId: "X" })), arrays: new Map([["X", { parallelism: 2, active: 1 }]]) },
      placed: ["x1"],
      limited: ["x2"],
    },
    {
      name: "a capped array does not hold back a later job of the same account, nor another array",
      snapshot: {
        cards: cards(3),
        queue: [job("x1", 1, { arrayId: "X" }), job("x2", 2, { arrayId: "X" }), job("p", 3), job("y1", 4, { arrayId: "Y" })],
        arrays: new Map([["X", { parallelism: 1, active: 0 }]]),
      },
      placed: ["x1", "p", "y1"],
      limited: ["x2"],
    },
    {
      name: "an array without a cap (absent from arrays) places like any job",
      snapshot: { cards: cards(2), queue: [1, 2, 3].map((i) => job(`z${i}`, i, { arrayId: "Z" })) },
      placed: ["z1", "z2"],
      limited: [],
    },
    {
      name: "fair share treats an array's jobs as its account's: the other account's single job goes between them",
      snapshot: {
        cards: cards(3),
        queue: [job("x1", 1, { arrayId: "X" }), job("x2", 2, { arrayId: "X" }), job("x3", 3, { arrayId: "X" }), job("b", 4, { clientId: "b" })],
      },
      placed: ["x1", "b", "x2"],
      limited: [],
    },
  ];
  test.each(cases)("$name", ({ snapshot, placed, limited }) => {
    const result = plan(snapshot);
    expect(result.placements.map((p) => p.jobId)).toEqual(placed);
    expect(result.waiting.filter((w) => w.reason === "ARRAY_LIMIT").map((w) => w.jobId)).toEqual(limited);
    for (const w of result.waiting.filter((w) => w.reason === "ARRAY_LIMIT")) expect(w.limit).toBe(snapshot.arrays?.get("X")?.parallelism);
  });
});

const J = "11111111-1111-4111-8111-111111111111";
const A = "22222222-2222-4222-8222-222222222222";
const outcomes = (total: number, completed = 0, failed = 0, cancelled = 0) => ({ total, completed, failed, cancelled });

describe("gpu-scheduler batch - judgeDependencies", () => {
  const cases: Array<{ name: string; deps: DependencyState[]; verdict: ReturnType<typeof judgeDependencies> }> = [
    { name: "no dependencies: ready", deps: [], verdict: { kind: "ready" } },
    {
      name: "succeeded, not ended: waits",
      deps: [{ condition: "succeeded", jobId: J, end: null }],
      verdict: { kind: "wait", reason: `waiting for job ${J} to succeed` },
    },
    {
      name: "failed, not ended: waits to fail",
      deps: [{ condition: "failed", jobId: J, end: null }],
      verdict: { kind: "wait", reason: `waiting for job ${J} to fail` },
    },
    {
      name: "finished, not ended: waits to finish",
      deps: [{ condition: "finished", jobId: J, end: null }],
      verdict: { kind: "wait", reason: `waiting for job ${J} to finish` },
    },
    { name: "succeeded and completed: ready", deps: [{ condition: "succeeded", jobId: J, end: "completed" }], verdict: { kind: "ready" } },
    {
      name: "succeeded but failed: cancelled",
      deps: [{ condition: "succeeded", jobId: J, end: "failed" }],
      verdict: { kind: "cancel", reason: `dependency ${J} failed, so it cannot succeed (condition "succeeded")` },
    },
    {
      name: "succeeded but cancelled: cancelled",
      deps: [{ condition: "succeeded", jobId: J, end: "cancelled" }],
      verdict: { kind: "cancel", reason: `dependency ${J} was cancelled, so it cannot succeed (condition "succeeded")` },
    },
    { name: "failed and failed: ready", deps: [{ condition: "failed", jobId: J, end: "failed" }], verdict: { kind: "ready" } },
    {
      name: "failed but completed: cancelled",
      deps: [{ condition: "failed", jobId: J, end: "completed" }],
      verdict: { kind: "cancel", reason: `dependency ${J} succeeded, so it cannot fail (condition "failed")` },
    },
    { name: "finished and cancelled: ready", deps: [{ condition: "finished", jobId: J, end: "cancelled" }], verdict: { kind: "ready" } },
    {
      name: "a target gone (retention): cancelled",
      deps: [{ condition: "finished", jobId: J, end: "gone" }],
      verdict: { kind: "cancel", reason: `dependency ${J} no longer exists, so it cannot finish (condition "finished")` },
    },
    {
      name: "one impossible among pending ones: cancelled at once",
      deps: [
        { condition: "succeeded", jobId: "p", end: null },
        { condition: "succeeded", jobId: J, end: "failed" },
      ],
      verdict: { kind: "cancel", reason: `dependency ${J} failed, so it cannot succeed (condition "succeeded")` },
    },
    {
      name: "the first undecided one is what it waits for",
      deps: [
        { condition: "succeeded", jobId: "done", end: "completed" },
        { condition: "finished", jobId: J, end: null },
      ],
      verdict: { kind: "wait", reason: `waiting for job ${J} to finish` },
    },
    { name: "array succeeded: every job completed", deps: [{ condition: "succeeded", arrayId: A, outcomes: outcomes(3, 3) }], verdict: { kind: "ready" } },
    {
      name: "array succeeded: some still running",
      deps: [{ condition: "succeeded", arrayId: A, outcomes: outcomes(3, 2) }],
      verdict: { kind: "wait", reason: `waiting for every job of array ${A} to succeed` },
    },
    {
      name: "array succeeded: one failed, decided before the rest end",
      deps: [{ condition: "succeeded", arrayId: A, outcomes: outcomes(3, 1, 1) }],
      verdict: { kind: "cancel", reason: `dependency ${A} (array): 1 failed and 0 cancelled, so not every job of it can succeed (condition "succeeded")` },
    },
    {
      name: "array finished: every job ended, any way",
      deps: [{ condition: "finished", arrayId: A, outcomes: outcomes(3, 1, 1, 1) }],
      verdict: { kind: "ready" },
    },
    {
      name: "array failed: one completed",
      deps: [{ condition: "failed", arrayId: A, outcomes: outcomes(2, 1) }],
      verdict: { kind: "cancel", reason: `dependency ${A} (array): 1 succeeded and 0 cancelled, so not every job of it can fail (condition "failed")` },
    },
  ];
  test.each(cases)("$name", ({ deps, verdict }) => expect(judgeDependencies(deps)).toEqual(verdict));
});

/** A job's decision inputs in `status`, never placed. */
const state = (status: JobState["status"]): JobState => ({
  status,
  nodeId: null,
  gpuUuid: null,
  holding: false,
  assignedAt: null,
  startedAt: null,
  completedAt: null,
  exitCode: null,
  output: null,
  errorMessage: null,
});

describe("gpu-scheduler batch - the waiting state in the state machine", () => {
  const now = new Date("2026-01-01T00:00:00Z");

  test.each([
    [
      "waiting",
      { status: "queued", statusReason: null },
      { status: "cancelled", completedAt: now, statusReason: "dependency x failed" },
      { statusReason: "r" },
    ],
    ["queued", null, null, null],
    ["cancelled", null, null, null],
  ] as const)("a %s job: released, cancelled for a dependency, still waiting", (status, released, cancelled, waiting) => {
    expect(releaseWaiting(state(status))).toEqual(released);
    expect(cancelForDependency(state(status), "dependency x failed", now)).toEqual(cancelled);
    expect(stillWaiting(state(status), "r")).toEqual(waiting);
  });

  test("a waiting job reads queued, and a client's cancel cancels it", () => {
    expect(publicStatus("waiting", null)).toBe("queued");
    expect(cancelJob(state("waiting"), now)).toEqual({ ok: true, patch: { status: "cancelled", completedAt: now }, stopOnNode: false });
  });

  test("an array's view counts its jobs by the status clients see, in index order", () => {
    const started = new Date();
    const view = toArrayView("A", 4, [
      { id: "j0", status: "completed", started_at: started },
      { id: "j1", status: "running", started_at: started },
      { id: "j2", status: "running", started_at: null },
      { id: "j3", status: "waiting", started_at: null },
    ]);
    expect(view).toEqual({ id: "A", total: 4, counts: { completed: 1, running: 1, queued: 2 }, jobIds: ["j0", "j1", "j2", "j3"] });
  });
});

describe("gpu-scheduler batch - the dependency resolver", () => {
  const quiet = { warn() {} } as unknown as LoggerInstance;
  const waitingJob = state("waiting");
  /** Dependant "d" (one waiting job "w" saying `reason`) on job J in state `end`; records what was written. */
  const setup = (end: DependencyState & { jobId: string }, reason: string | null) => {
    const writes: Array<{ id: string; patch: unknown }> = [];
    const released: number[] = [];
    const deps = {
      statesOf: async () => new Map([["d", [end]]]),
      dependantsOf: async () => ["d"],
      waitingOf: async () => [{ id: "w", dependant: "d", reason }],
      waitingPage: async () => ({ keys: ["w"], lastSeq: null }),
    };
    const writer: Pick<JobWriter, "applyTo"> = {
      applyTo: async (ids, decide) => {
        const written = new Map<string, JobPatch>();
        for (const id of ids) {
          const patch = decide(waitingJob, id);
          if (!patch) continue;
          written.set(id, patch);
          writes.push({ id, patch });
        }
        return { written, seen: new Map() };
      },
    };
    const resolver = new DependencyResolver(deps, writer, { now: () => new Date(0) }, () => released.push(1), quiet);
    return { resolver, writes, released };
  };

  test.each([
    [
      "met: released, a placement pass asked",
      { condition: "succeeded", jobId: J, end: "completed" },
      "old",
      true,
      [{ status: "queued", statusReason: null }],
      1,
    ],
    [
      "impossible: cancelled with the reason",
      { condition: "succeeded", jobId: J, end: "failed" },
      "old",
      true,
      [{ status: "cancelled", completedAt: new Date(0), statusReason: `dependency ${J} failed, so it cannot succeed (condition "succeeded")` }],
      0,
    ],
    [
      "undecided, the reason changed: written",
      { condition: "finished", jobId: J, end: null },
      "old",
      true,
      [{ statusReason: `waiting for job ${J} to finish` }],
      0,
    ],
    ["undecided, the same reason: nothing written", { condition: "finished", jobId: J, end: null }, `waiting for job ${J} to finish`, true, [], 0],
    ["undecided in a sweep: nothing written", { condition: "finished", jobId: J, end: null }, "old", false, [], 0],
  ] as const)("%s", async (_name, end, reason, refresh, patches, passes) => {
    const { resolver, writes, released } = setup(end as DependencyState & { jobId: string }, reason);
    await resolver.resolve(["d"], refresh);
    expect(writes.map((w) => w.patch)).toEqual(patches);
    expect(released).toHaveLength(passes);
  });
});
