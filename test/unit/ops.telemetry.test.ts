/** The metrics service's bookkeeping: GPU nodes going stale, and payload checks. */
import { checkHeartbeat, NodeHeartbeat } from "../../lib/gpu-protocol";
import { isInferenceCompleted } from "../../services/inference/events";
import { dbaasStatsOf, GpuTelemetry, inferenceLabels, schedulerStatsOf, STALE_AFTER_MS } from "../../services/metrics/telemetry";

/** The metrics service checks heartbeats with the protocol's own check. */
const isHeartbeat = (v: unknown) => checkHeartbeat(v).ok;

const card = (uuid: string, index = 0) => ({
  uuid,
  index,
  name: "NVIDIA GeForce RTX 3060",
  memoryTotal: 12288,
  memoryUsed: 100,
  utilization: 5,
  temperature: 50,
});
const hb = (nodeId: string, cards = [card(`GPU-${nodeId}`)]): NodeHeartbeat => ({
  nodeId,
  cards,
  runningJobIds: [],
  executor: "process",
  at: new Date(0).toISOString(),
});

describe("ops - GPU telemetry", () => {
  it("ops - reports every card of the nodes heard recently, with its node", () => {
    const t = new GpuTelemetry();
    t.record(hb("a", [card("GPU-1", 0), card("GPU-2", 1)]), 1000);
    t.record(hb("b"), 2000);
    expect(t.current(3000).map((c) => `${c.nodeId}/${c.uuid}`)).toEqual(["a/GPU-1", "a/GPU-2", "b/GPU-b"]);
  });

  it("ops - a node silent for longer than STALE_AFTER_MS is dropped; a newer heartbeat replaces the older", () => {
    const t = new GpuTelemetry();
    t.record(hb("a"), 0);
    t.record(hb("b"), 0);
    t.record(hb("b", [card("GPU-new")]), 10_000);
    expect(t.current(STALE_AFTER_MS).map((c) => c.uuid)).toEqual(["GPU-a", "GPU-new"]);
    expect(t.current(STALE_AFTER_MS + 1).map((c) => c.uuid)).toEqual(["GPU-new"]);
  });
});

describe("ops - payload checks", () => {
  const heartbeats: Array<[string, unknown, boolean]> = [
    ["a well-formed heartbeat", hb("a"), true],
    ["a node without cards", hb("a", []), true],
    ["no nodeId", { cards: [] }, false],
    ["a card with a string figure", { nodeId: "a", cards: [{ ...card("x"), utilization: "5" }] }, false],
    ["not an object", "beat", false],
  ];
  it.each(heartbeats)("ops - heartbeat: %s", (_n, value, ok) => expect(isHeartbeat(value)).toBe(ok));

  const inference: Array<[string, unknown, boolean]> = [
    ["completed", { model: "m", provider: "ollama", tokensUsed: 3, durationMs: 10, outcome: "ok" }, true],
    ["model not found (no provider, no tokens)", { model: "typo", provider: null, tokensUsed: null, durationMs: 1, outcome: "error" }, true],
    ["no duration", { model: "m", provider: "ollama", tokensUsed: 3, outcome: "ok" }, false],
    ["no model", { provider: "ollama", durationMs: 1, outcome: "ok" }, false],
  ];
  it.each(inference)("ops - inference.completed: %s", (_n, value, ok) => expect(isInferenceCompleted(value)).toBe(ok));

  it("ops - an unknown model is one label value, not whatever the client typed", () => {
    expect(inferenceLabels({ model: "typo-123", provider: null, tokensUsed: 0, durationMs: 1, outcome: "error" })).toEqual({
      model: "(unknown)",
      provider: "none",
    });
    expect(inferenceLabels({ model: "m", provider: "ollama", tokensUsed: 0, durationMs: 1, outcome: "ok" })).toEqual({ model: "m", provider: "ollama" });
  });

  it("ops - stats answers keep numeric counts only", () => {
    expect(schedulerStatsOf({ queueDepth: 2, jobsByStatus: { queued: 2, running: "1" }, pendingCards: { "gpu-node.a": 3, "gpu-node.b": "x" } })).toEqual({
      queueDepth: 2,
      jobsByStatus: { queued: 2 },
      pendingCards: { "gpu-node.a": 3 },
      disallowedCards: {},
    });
    expect(schedulerStatsOf(null)).toEqual({ queueDepth: null, jobsByStatus: {}, pendingCards: {}, disallowedCards: {} });
    expect(dbaasStatsOf({ databasesByState: { active: 3 }, storageMbByState: { active: 12.5 } })).toEqual({
      databasesByState: { active: 3 },
      storageMbByState: { active: 12.5 },
      walArchive: {},
    });
    expect(
      dbaasStatsOf({ databasesByState: {}, storageMbByState: {}, walArchive: { failing: 1, failedTotal: 4, secondsSinceArchived: 90 } }).walArchive,
    ).toEqual({
      failing: 1,
      failedTotal: 4,
      secondsSinceArchived: 90,
    });
  });
});
