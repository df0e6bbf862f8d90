import { checkHeartbeat, checkJobEvent, NodeHeartbeat } from "../../lib/gpu-protocol";
import { Batcher, Coalescer } from "../../services/gpu-scheduler/loop/batcher";
import { ClusterView } from "../../services/gpu-scheduler/core/cluster-view";
import { toClusterStatus } from "../../services/gpu-scheduler/api/job-view";

const gpu = (uuid: string, index = 0, name = "NVIDIA GeForce RTX 3060") => ({
  uuid,
  index,
  name,
  memoryTotal: 12288,
  memoryUsed: 300,
  utilization: 7,
  temperature: 41,
});
const hb = (nodeId: string, uuids: string[], runningJobIds: string[] = []): NodeHeartbeat => ({
  nodeId,
  cards: uuids.map((u, i) => gpu(u, i)),
  runningJobIds,
  executor: "process",
  at: new Date(0).toISOString(),
});

describe("gpu-scheduler cluster view - heartbeats and loss", () => {
  test("gpu-scheduler cluster view - a new node or a changed set of cards is news, a repeat is not", () => {
    const view = new ClusterView(0);
    expect(view.heard(hb("n1", ["g1", "g2"]), 100).changed).toBe(true);
    expect(view.heard(hb("n1", ["g2", "g1"]), 1100).changed).toBe(false);
    expect(view.heard(hb("n1", ["g1"]), 2100).changed).toBe(true);
    expect(view.cards().map((c) => c.uuid)).toEqual(["g1"]);
  });

  test("gpu-scheduler cluster view - a node silent past the timeout is reported, one heard in time is not", () => {
    const view = new ClusterView(0);
    view.heard(hb("n1", ["g1"]), 1000);
    view.heard(hb("n2", ["g2"]), 9000);
    expect(view.silent(10_500, 3000)).toEqual(["n1"]);
    expect(view.silent(4000, 3000)).toEqual([]);
    view.remove("n1");
    expect(view.cards().map((c) => c.nodeId)).toEqual(["n2"]);
  });

  test("gpu-scheduler cluster view - nodes holding cards but never heard are lost only once the view is older than the timeout", () => {
    const view = new ClusterView(1000);
    view.heard(hb("alive", ["g1"]), 1500);
    expect(view.unheard(["alive", "gone"], 3000, 3000)).toEqual([]);
    expect(view.unheard(["alive", "gone"], 4500, 3000)).toEqual(["gone"]);
  });

  test("gpu-scheduler cluster view - a suspended node takes no placements until heard again", () => {
    const view = new ClusterView(0);
    view.heard(hb("n1", ["g1"]), 0);
    view.heard(hb("n2", ["g2"]), 0);
    view.suspend("n1");
    expect(view.schedulableCards().map((c) => c.uuid)).toEqual(["g2"]);
    expect(view.cards()).toHaveLength(2);
    expect(view.heard(hb("n1", ["g1"]), 1000).changed).toBe(true);
    expect(view.schedulableCards().map((c) => c.uuid)).toEqual(["g1", "g2"]);
  });

  test("gpu-scheduler cluster view - status counts busy and free cards with live telemetry", () => {
    const view = new ClusterView(0);
    view.heard(hb("n2", ["b0", "b1"]), 0);
    view.heard(hb("n1", ["a0"]), 0);
    // Clients see the labeler's opaque label, never the node id (job-view.ts).
    const status = toClusterStatus(view.cards(), new Set(["b1"]), 4, (id) => `label-of-${id}`);
    expect(status.queueDepth).toBe(4);
    expect(status.cluster).toMatchObject({ totalGpus: 3, availableGpus: 2, busyGpus: 1 });
    expect(status.cluster.gpus.map((g) => [g.nodeId, g.uuid, g.available])).toEqual([
      ["label-of-n1", "a0", true],
      ["label-of-n2", "b0", true],
      ["label-of-n2", "b1", false],
    ]);
    expect(status.cluster.gpus[0]).toMatchObject({ name: "NVIDIA GeForce RTX 3060", utilization: 7, memoryUsed: 300, memoryTotal: 12288, temperature: 41 });
  });
});

describe("gpu-scheduler protocol guards - malformed messages are refused", () => {
  const jobId = "6f1c2b8e-0000-4000-8000-000000000001";
  const ok = { jobId, nodeId: "n1", gpuUuid: "g1", at: "2026-01-01T00:00:00Z" };
  test.each([
    ["started", { type: "started", ...ok }, true],
    ["finished", { type: "finished", ...ok, exitCode: 0, output: "" }, true],
    ["failed without exit code", { type: "failed", ...ok, errorMessage: "x", exitCode: null, output: "" }, true],
    ["cancelled", { type: "cancelled", ...ok, exitCode: 137, output: "" }, true],
    ["unknown type", { type: "exploded", ...ok }, false],
    ["finished without exit code", { type: "finished", ...ok, output: "" }, false],
    ["finished with a fractional exit code", { type: "finished", ...ok, exitCode: 1.5, output: "" }, false],
    ["failed without a message", { type: "failed", ...ok, exitCode: 1, output: "" }, false],
    ["a job id that is not a UUID", { type: "started", ...ok, jobId: "x" }, false],
    ["a bad timestamp", { type: "started", ...ok, at: "yesterday" }, false],
    ["not an object", "started", false],
  ])("gpu-scheduler protocol guards - job event: %s", (_name, payload, valid) => {
    expect(checkJobEvent(payload).ok).toBe(valid);
  });

  test.each([
    ["a proper heartbeat", hb("n1", ["g1"], ["j"]), true],
    ["no cards list", { ...hb("n1", []), cards: undefined }, false],
    ["a card without telemetry", { ...hb("n1", []), cards: [{ uuid: "g", index: 0, name: "x" }] }, false],
    ["an unknown executor", { ...hb("n1", []), executor: "vm" }, false],
    ["job ids that are not strings", { ...hb("n1", []), runningJobIds: [1] }, false],
  ])("gpu-scheduler protocol guards - heartbeat: %s", (_name, payload, valid) => {
    expect(checkHeartbeat(payload).ok).toBe(valid);
  });
});

describe("gpu-scheduler batching", () => {
  test("gpu-scheduler batching - items pushed while a batch runs go together in the next one, results in order", async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const batcher = new Batcher<number, number>(
      async (items) => {
        batches.push(items);
        if (batches.length === 1) await gate;
        return items.map((i) => i * 10);
      },
      { maxBatch: 100, maxInFlight: 1 },
    );
    const first = batcher.push(1);
    await new Promise((r) => setImmediate(r));
    const rest = [2, 3, 4].map((i) => batcher.push(i));
    release();
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30, 40]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  test("gpu-scheduler batching - a failed batch rejects its own items only", async () => {
    const batcher = new Batcher<number, number>(async (items) => {
      if (items.includes(13)) throw new Error("unlucky");
      return items;
    });
    const bad = batcher.push(13);
    await expect(bad).rejects.toThrow("unlucky");
    await expect(batcher.push(7)).resolves.toBe(7);
  });

  test("gpu-scheduler batching - requests during a pass cause exactly one more pass", async () => {
    let passes = 0;
    let release!: () => void;
    let gate = new Promise<void>((r) => (release = r));
    const coalescer = new Coalescer(
      async () => {
        passes++;
        if (passes === 1) await gate;
      },
      () => undefined,
    );
    const first = coalescer.request();
    const during = [coalescer.request(), coalescer.request(), coalescer.request()];
    release();
    await Promise.all([first, ...during]);
    expect(passes).toBe(2);
    gate = Promise.resolve();
    await coalescer.request();
    expect(passes).toBe(3);
  });
});
