/** Housekeeping's pure decisions (tables), and a housekeeping run on in-memory fakes. */
import { randomUUID } from "crypto";
import { Housekeeping, nodeLossCounts, staleAssignedAction, unreportedJobs } from "../../services/gpu-scheduler/loop/housekeeping";
import { fakeCluster, heartbeat, quiet } from "./gpu-scheduler.fakes";

const SETTINGS = { nodeTimeoutMs: 3000, dispatchTimeoutMs: 1000, warmUpMs: 0 };
const listing = (lists: Record<string, string[]>) => (nodeId: string) => (lists[nodeId] ? new Set(lists[nodeId]) : undefined);

describe("gpu-scheduler housekeeping - decisions", () => {
  test.each([
    ["its run call is still being made here: wait", ["j1"], true, "wait"],
    ["the node lists it: confirm (it runs)", ["j1"], false, "confirm"],
    ["the node does not list it: back to the queue", [], false, "unplace"],
  ] as const)("gpu-scheduler housekeeping - a stale placement, %s", (_name, listed, dispatching, action) => {
    expect(staleAssignedAction({ id: "j1", node_id: "node-a" }, listing({ "node-a": [...listed] }), dispatching)).toBe(action);
  });

  test("gpu-scheduler housekeeping - a stale placement on a node not live goes back to the queue", () => {
    expect(staleAssignedAction({ id: "j1", node_id: "gone" }, listing({}), false)).toBe("unplace");
  });

  test("gpu-scheduler housekeeping - a running job missing from its live node is failed once missing for the limit", () => {
    const running = [
      { id: "listed", node_id: "node-a" },
      { id: "missing-new", node_id: "node-a" },
      { id: "missing-long", node_id: "node-a" },
      { id: "dispatching", node_id: "node-a" },
      { id: "node-not-live", node_id: "gone" },
    ];
    const { missingSince, fail } = unreportedJobs(
      running,
      listing({ "node-a": ["listed"] }),
      (id) => id === "dispatching",
      new Map([
        ["missing-long", 1000],
        ["listed", 500], // listed again: forgotten
      ]),
      10_000,
      9000,
    );
    expect(fail).toEqual([{ id: "missing-long", node_id: "node-a" }]);
    expect(missingSince).toEqual(
      new Map([
        ["missing-new", 10_000],
        ["missing-long", 1000],
      ]),
    );
  });

  test("gpu-scheduler housekeeping - node loss counts failed, requeued and released jobs", () => {
    expect(nodeLossCounts([{ status: "failed" }, { status: "queued" }, { status: "queued" }, { holding: false }])).toEqual({
      failed: 1,
      requeued: 2,
      released: 1,
    });
  });
});

describe("gpu-scheduler housekeeping - on fakes", () => {
  const setUp = () => {
    const { clock, store, nodes, view, writer, stopper } = fakeCluster();
    const housekeeping = new Housekeeping(store, writer, view, stopper, () => false, clock, quiet, SETTINGS);
    return { clock, store, nodes, view, housekeeping };
  };

  test("gpu-scheduler housekeeping - a silent node is lost: running jobs fail, placements go back to the queue, ended jobs free their card", async () => {
    const { clock, store, view, housekeeping } = setUp();
    view.heard(heartbeat("node-a", ["GPU-1", "GPU-2", "GPU-3"]), clock.ms);
    const on = (gpuUuid: string) => ({ nodeId: "node-a", gpuUuid, holding: true, assignedAt: clock.now() });
    const running = store.add(randomUUID(), { ...on("GPU-1"), status: "running", startedAt: clock.now() });
    const placed = store.add(randomUUID(), { ...on("GPU-2"), status: "assigned" });
    const ended = store.add(randomUUID(), { ...on("GPU-3"), status: "cancelled", completedAt: clock.now() });
    clock.advance(SETTINGS.nodeTimeoutMs + 1);
    await housekeeping.run();
    expect(store.get(running)).toMatchObject({ status: "failed", holding: false, errorMessage: "GPU node node-a was lost (no heartbeat for 3 s)" });
    expect(store.get(placed)).toMatchObject({ status: "queued", holding: false, nodeId: null, gpuUuid: null, assignedAt: null });
    expect(store.get(ended)).toMatchObject({ status: "cancelled", holding: false });
    expect(view.has("node-a")).toBe(false);
  });

  test("gpu-scheduler housekeeping - a placement never confirmed goes back to the queue; one the node lists is the node's (not started yet)", async () => {
    const { clock, store, view, housekeeping } = setUp();
    const at = clock.now();
    const lost = store.add(randomUUID(), { status: "assigned", nodeId: "node-a", gpuUuid: "GPU-1", holding: true, assignedAt: at });
    const runs = store.add(randomUUID(), { status: "assigned", nodeId: "node-a", gpuUuid: "GPU-2", holding: true, assignedAt: at });
    clock.advance(2 * SETTINGS.dispatchTimeoutMs + 1);
    view.heard(heartbeat("node-a", ["GPU-1", "GPU-2"], [runs]), clock.ms);
    await housekeeping.run();
    expect(store.get(lost)).toMatchObject({ status: "queued", nodeId: null, holding: false });
    expect(store.get(runs)).toMatchObject({ status: "running", startedAt: null, holding: true });
  });

  test("gpu-scheduler housekeeping - a running job its live node stopped listing fails after three node timeouts", async () => {
    const { clock, store, view, housekeeping } = setUp();
    const id = store.add(randomUUID(), { status: "running", nodeId: "node-a", gpuUuid: "GPU-1", holding: true, startedAt: clock.now() });
    for (let t = 0; t <= 3; t++) {
      view.heard(heartbeat("node-a", ["GPU-1"]), clock.ms);
      await housekeeping.run();
      expect(store.get(id).status).toBe(t < 3 ? "running" : "failed");
      clock.advance(SETTINGS.nodeTimeoutMs);
    }
    expect(store.get(id).errorMessage).toMatch(/no longer runs the job/);
  });

  test("gpu-scheduler housekeeping - queued jobs past their queue timeout are cancelled (expired), the others wait", async () => {
    const { clock, store, housekeeping } = setUp();
    const deadline = (s: number) => ({ queueTimeoutS: s, queueDeadline: new Date(clock.ms + s * 1000) });
    const due = store.add(randomUUID(), { status: "queued", nodeId: null, gpuUuid: null, holding: false, ...deadline(1) });
    const later = store.add(randomUUID(), { status: "queued", nodeId: null, gpuUuid: null, holding: false, ...deadline(60) });
    const none = store.add(randomUUID(), { status: "queued", nodeId: null, gpuUuid: null, holding: false });
    clock.advance(1000);
    await housekeeping.run();
    expect(store.get(due)).toMatchObject({ status: "cancelled", completedAt: clock.now(), statusReason: expect.stringContaining("expired") });
    expect(store.get(later).status).toBe("queued");
    expect(store.get(none).status).toBe("queued");
  });
});
