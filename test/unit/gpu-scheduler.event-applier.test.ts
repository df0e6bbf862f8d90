/** The event applier's pure decisions (tables), and the applier itself on in-memory fakes. */
import { randomUUID } from "crypto";
import type { JobEvent } from "../../lib/gpu-protocol";
import { decideEvents, EventApplier, reconcileHeartbeat } from "../../services/gpu-scheduler/loop/event-applier";
import { JobWriter } from "../../services/gpu-scheduler/loop/job-writer";
import { NodeStopper } from "../../services/gpu-scheduler/loop/node-stopper";
import type { AssignedJob } from "../../services/gpu-scheduler/store/placement.repository";
import { asPlaced } from "../../services/gpu-scheduler/loop/placement-loop";
import { JobState } from "../../services/gpu-scheduler/core/transitions";
import { KnownStates, patched } from "../../services/gpu-scheduler/loop/known-states";
import { FakeJobs, FakeNodes, heartbeat, ManualClock, quiet, until } from "./gpu-scheduler.fakes";

const T0 = new Date("2026-01-01T10:00:00.000Z");
const T1 = new Date("2026-01-01T10:00:05.000Z");
const T2 = new Date("2026-01-01T10:00:09.000Z");
const placed: JobState = asPlaced({
  id: "job-1",
  client_id: "client-1",
  node_id: "node-a",
  gpu_uuid: "GPU-1",
  gpu_uuids: ["GPU-1"],
  spec: { command: "true", timeoutSeconds: 3600 },
  env: null,
  assigned_at: T0,
  attempts: 1,
  max_retries: 0,
} satisfies AssignedJob);
const started = (jobId: string, nodeId = "node-a"): JobEvent => ({ type: "started", jobId, nodeId, gpuUuid: "GPU-1", at: T1.toISOString() });
const finished = (jobId: string, nodeId = "node-a"): JobEvent => ({
  type: "finished",
  jobId,
  nodeId,
  gpuUuid: "GPU-1",
  at: T2.toISOString(),
  startedAt: T1.toISOString(),
  exitCode: 0,
  output: "done",
});

describe("gpu-scheduler event applier - decideEvents", () => {
  test("gpu-scheduler event applier - a job's events fold in arrival order into one patch from the state first seen", () => {
    const { decided, stop, misrouted } = decideEvents([started("j1"), finished("j1")], new Map([["j1", placed]]), T2);
    expect(stop).toEqual([]);
    expect(misrouted).toEqual([]);
    expect(decided.get("j1")).toEqual({
      seen: placed,
      now: expect.objectContaining({ status: "completed", holding: false }),
      patch: { status: "completed", startedAt: T1, completedAt: T2, exitCode: 0, output: "done", holding: false, errorMessage: null },
    });
  });

  test.each([
    ["started for a job this cluster does not know: stopped there", [started("ghost")], new Map<string, JobState>(), [{ jobId: "ghost", nodeId: "node-a" }], 0],
    ["finished for a job this cluster does not know: nothing", [finished("ghost")], new Map<string, JobState>(), [], 0],
    [
      "started from a node the job is not on: stopped there, noted",
      [started("j1", "node-b")],
      new Map([["j1", placed]]),
      [{ jobId: "j1", nodeId: "node-b" }],
      1,
    ],
    ["finished from a node the job is not on: ignored, noted", [finished("j1", "node-b")], new Map([["j1", placed]]), [], 1],
  ] as const)("gpu-scheduler event applier - %s", (_name, events, states, stop, misrouted) => {
    const out = decideEvents([...events], states, T2);
    expect(out.decided.size).toBe(0);
    expect(out.stop).toEqual(stop);
    expect(out.misrouted).toHaveLength(misrouted);
  });
});

describe("gpu-scheduler event applier - reconcileHeartbeat", () => {
  const rows = [
    { id: "placed-here", status: "assigned" as const, node_id: "node-a" },
    { id: "running-here", status: "running" as const, node_id: "node-a" },
    { id: "ended", status: "completed" as const, node_id: "node-a" },
    { id: "elsewhere", status: "running" as const, node_id: "node-b" },
    { id: "requeued", status: "queued" as const, node_id: null },
  ];
  test("gpu-scheduler event applier - confirms placements the node runs, stops what it should not run", () => {
    const hb = { nodeId: "node-a", runningJobIds: ["placed-here", "running-here", "ended", "elsewhere", "requeued", "unknown"] };
    expect(reconcileHeartbeat(hb, rows)).toEqual({ confirm: ["placed-here"], stop: ["ended", "elsewhere", "requeued", "unknown"] });
  });
});

describe("gpu-scheduler event applier - on fakes", () => {
  const setUp = () => {
    const store = new FakeJobs();
    const nodes = new FakeNodes();
    const writer = new JobWriter(store);
    let freed = 0;
    const stopper = new NodeStopper(nodes, writer, () => freed++, quiet);
    const known = new KnownStates();
    const applier = new EventApplier(store, writer, stopper, new ManualClock(T2.getTime()), quiet, () => freed++, undefined, known);
    return { store, nodes, applier, known, freed: () => freed };
  };

  test("gpu-scheduler event applier - started then finished: completed, card free, a placement pass asked for", async () => {
    const { store, applier, freed } = setUp();
    const id = store.add(randomUUID(), placed);
    await Promise.all([applier.apply(started(id)), applier.apply(finished(id))]);
    expect(store.get(id)).toMatchObject({ status: "completed", holding: false, startedAt: T1, completedAt: T2, exitCode: 0 });
    expect(freed()).toBe(1);
  });

  test("gpu-scheduler event applier - a job changed between read and write is read and decided again", async () => {
    const { store, applier } = setUp();
    const id = store.add(randomUUID(), placed);
    let once = true;
    store.beforeWrite = () => {
      if (once) Object.assign(store.get(id), { status: "running", startedAt: T1 }); // the run call's answer got there first
      once = false;
    };
    await applier.apply(finished(id));
    expect(store.get(id)).toMatchObject({ status: "completed", holding: false, startedAt: T1 });
    expect(store.writes).toBe(2);
  });

  test("gpu-scheduler event applier - a heartbeat confirms a placement (not a start) and stops a job this cluster does not know", async () => {
    const { store, nodes, applier } = setUp();
    const id = store.add(randomUUID(), placed);
    const ghost = randomUUID();
    await applier.reconcile(heartbeat("node-a", ["GPU-1"], [id, ghost]));
    expect(store.get(id)).toMatchObject({ status: "running", startedAt: null });
    await until(() => nodes.cancels.length === 1, "the stop");
    expect(nodes.cancels).toEqual([{ nodeId: "node-a", jobId: ghost }]);
  });

  test("gpu-scheduler event applier - giving up on a terminal event fails the job and frees its card", async () => {
    const { store, applier, freed } = setUp();
    const id = store.add(randomUUID(), { ...placed, status: "running", startedAt: T1 });
    await applier.giveUp(finished(id), new Error("still failing"));
    expect(store.get(id)).toMatchObject({ status: "failed", holding: false, completedAt: T2 });
    expect(store.get(id).errorMessage).toMatch(/could not be stored/);
    expect(freed()).toBe(1);
  });

  test("gpu-scheduler event applier - the events of a job whose state this replica wrote last are decided with no read", async () => {
    const { store, applier, known } = setUp();
    const id = store.add(randomUUID(), placed);
    known.remember(id, patched(placed, { status: "running" })); // as the placement's confirmation leaves it
    Object.assign(store.get(id), { status: "running" });
    const reads = jest.spyOn(store, "states");
    await applier.apply(started(id));
    await applier.apply(finished(id));
    expect(store.get(id)).toMatchObject({ status: "completed", holding: false, startedAt: T1, completedAt: T2, exitCode: 0 });
    expect(reads).not.toHaveBeenCalled();
    expect(known.size).toBe(0); // an ended job is forgotten
  });

  test("gpu-scheduler event applier - a remembered state another writer changed: the write misses, the job is read and decided again", async () => {
    const { store, applier, known } = setUp();
    const id = store.add(randomUUID(), { ...placed, status: "running", startedAt: T1 });
    known.remember(id, { ...placed, status: "running", startedAt: T1 });
    Object.assign(store.get(id), { status: "cancelled", completedAt: T1 }); // cancelled by another replica; the card still held
    await applier.apply(finished(id));
    expect(store.get(id)).toMatchObject({ status: "cancelled", holding: false, completedAt: T1 });
    expect(known.size).toBe(0);
  });

  test("gpu-scheduler event applier - a remembered state that would stop a job on a node is read again first: a job placed again elsewhere is not stopped", async () => {
    const { store, nodes, applier, known } = setUp();
    const id = store.add(randomUUID(), { ...placed, nodeId: "node-b", gpuUuid: "GPU-1", status: "running" });
    known.remember(id, { ...placed, status: "running" }); // stale: it was on node-a when this replica wrote it
    await applier.apply(started(id, "node-b"));
    expect(store.get(id)).toMatchObject({ status: "running", nodeId: "node-b", startedAt: T1 });
    expect(nodes.cancels).toEqual([]);
  });

  test("gpu-scheduler event applier - what is remembered is what a read gives: the placement cleared with nodeId, output only as a mark, no retry fields", () => {
    const written = patched(
      { ...placed, status: "running", startedAt: T1 },
      {
        status: "queued",
        nodeId: null,
        gpuUuid: null,
        holding: false,
        output: "a long output",
        notBefore: T2,
        endedAttempt: { attempt: 1, nodeId: "node-a", startedAt: T1, endedAt: T2, exitCode: 1, output: null, errorMessage: "x" },
      },
    );
    expect(written).toEqual({ ...placed, status: "queued", nodeId: null, gpuUuid: null, assignedAt: null, holding: false, startedAt: T1, output: "" });
  });
});
