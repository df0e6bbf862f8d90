/** The operators' pure decisions (tables): node states and the node list, drains in a placement pass and in the clients' status, the audit entry, an operator's cancel. */
import type { NodeEntry, ViewCard } from "../../services/gpu-scheduler/core/cluster-view";
import { toClusterStatus } from "../../services/gpu-scheduler/api/job-view";
import { adminNodes, nodeState } from "../../services/gpu-scheduler/api/node-admin";
import type { NodeRow } from "../../services/gpu-scheduler/store/nodes.repository";
import { decidePass } from "../../services/gpu-scheduler/loop/placement-loop";
import { cancelJob, JobState } from "../../services/gpu-scheduler/core/transitions";
import { auditEntry, auditLine } from "../../services/admin/audit";

const gpu = (uuid: string, index = 0) => ({ uuid, index, name: "Test GPU", memoryTotal: 1024, memoryUsed: 0, utilization: 0, temperature: 40 });
const card = (nodeId: string, uuid: string): ViewCard => ({ ...gpu(uuid), nodeId });
const heard = (nodeId: string, uuids: string[]): NodeEntry => ({
  nodeId,
  cards: uuids.map((u, i) => gpu(u, i)),
  held: [],
  announced: uuids.map((u, i) => gpu(u, i)),
  runningJobIds: new Set(),
  lastSeenMs: Date.parse("2026-01-01T00:00:00Z"),
  suspended: false,
});
const row = (nodeId: string, over: Partial<NodeRow> = {}): NodeRow => ({
  node_id: nodeId,
  draining: false,
  drained_at: null,
  drained_by: null,
  lost_at: null,
  ...over,
});
const LOST = new Date("2026-01-01T01:00:00Z");
const DRAINED = new Date("2026-01-01T02:00:00Z");

describe("gpu-scheduler admin - node state", () => {
  test.each<[string, boolean, NodeRow | undefined, string | undefined]>([
    ["heard, nothing stored", true, undefined, "ready"],
    ["heard, resumed", true, row("n"), "ready"],
    ["heard, drained", true, row("n", { draining: true }), "draining"],
    ["heard again after a loss", true, row("n", { lost_at: LOST }), "ready"],
    ["not heard, declared lost", false, row("n", { lost_at: LOST }), "lost"],
    ["not heard, drained and lost", false, row("n", { draining: true, lost_at: LOST }), "lost"],
    ["not heard yet by this replica, drained", false, row("n", { draining: true }), "draining"],
    ["not heard, resumed, never lost: nothing to show", false, row("n"), undefined],
    ["unknown", false, undefined, undefined],
  ])("gpu-scheduler admin - %s → %s", (_name, isHeard, stored, state) => expect(nodeState(isHeard, stored)).toBe(state));
});

describe("gpu-scheduler admin - the node list", () => {
  test("gpu-scheduler admin - real ids with labels, cards with busy marks, running jobs, drains and losses", () => {
    const list = adminNodes(
      [heard("gpu-node.b", ["b1", "b0"]), heard("gpu-node.a", ["a0"])],
      [row("gpu-node.b", { draining: true, drained_at: DRAINED, drained_by: "admin-1" }), row("gpu-node.gone", { lost_at: LOST }), row("gpu-node.resumed")],
      new Map([["gpu-node.b", ["job-1"]]]),
      new Set(["b1"]),
      (id) => `label(${id})`,
    );
    expect(list.map((n) => [n.id, n.label, n.state, n.runningJobs])).toEqual([
      ["gpu-node.a", "label(gpu-node.a)", "ready", []],
      ["gpu-node.b", "label(gpu-node.b)", "draining", ["job-1"]],
      ["gpu-node.gone", "label(gpu-node.gone)", "lost", []],
    ]);
    // In the cards' index order (b1 is index 0 on its host).
    expect(list[1].cards.map((c) => [c.uuid, c.index, c.busy])).toEqual([
      ["b1", 0, true],
      ["b0", 1, false],
    ]);
    expect(list[1]).toMatchObject({ drainedAt: DRAINED.toISOString(), drainedBy: "admin-1", lastSeenAt: "2026-01-01T00:00:00.000Z", lostAt: null });
    expect(list[2]).toMatchObject({ cards: [], lastSeenAt: null, lostAt: LOST.toISOString() });
  });
});

describe("gpu-scheduler admin - a drained node in placement and in the clients' status", () => {
  const queue = [
    { jobId: "j1", gpuType: null, seq: 1 },
    { jobId: "j2", gpuType: null, seq: 2 },
  ];
  const cards = [card("drained", "d0"), card("drained", "d1"), card("ready", "r0")];

  test.each<[string, Set<string> | undefined, string[], string[]]>([
    ["no drain: every free card takes a job (best fit: the single card first)", undefined, ["r0", "d0"], []],
    ["drained: its free cards take none, the others do; the rest wait for a free GPU", new Set(["drained"]), ["r0"], ["j2"]],
    ["every node drained: nothing starts", new Set(["drained", "ready"]), [], ["j1", "j2"]],
  ])("gpu-scheduler admin - %s", (_name, drained, placedOn, waiting) => {
    const pass = decidePass(cards, { held: new Set(), queue, drained }, 0);
    expect(pass.placements.map((p) => p.gpuUuid)).toEqual(placedOn);
    expect(pass.waiting.map((w) => [w.jobId, w.reason])).toEqual(waiting.map((id) => [id, "MATCHING_GPUS_BUSY"]));
    expect(pass.heldElsewhere).toBe(0);
  });

  test("gpu-scheduler admin - clients see a drained node's cards, none available; total = available + busy", () => {
    const status = toClusterStatus(cards, new Set(["d0"]), 0, (id) => id, new Set(["drained"]));
    expect(status.cluster).toMatchObject({ totalGpus: 3, availableGpus: 1, busyGpus: 2 });
    expect(status.cluster.gpus.map((g) => [g.uuid, g.available])).toEqual([
      ["d0", false],
      ["d1", false],
      ["r0", true],
    ]);
  });
});

describe("gpu-scheduler admin - an operator's cancel", () => {
  const base: JobState = {
    status: "running",
    nodeId: "n",
    gpuUuid: "g",
    holding: true,
    assignedAt: new Date(0),
    startedAt: new Date(0),
    completedAt: null,
    exitCode: null,
    output: null,
    errorMessage: null,
    attempts: 1,
    maxRetries: 0,
  };
  const now = new Date(1000);
  test.each<[string, JobState, string | undefined, unknown]>([
    ["running, by its client: no reason", base, undefined, { ok: true, patch: { status: "cancelled", completedAt: now }, stopOnNode: true }],
    [
      "running, by an operator: the reason",
      base,
      "cancelled by an administrator",
      { ok: true, patch: { status: "cancelled", completedAt: now, statusReason: "cancelled by an administrator" }, stopOnNode: true },
    ],
    [
      "queued, by an operator",
      { ...base, status: "queued", nodeId: null, gpuUuid: null, holding: false },
      "x",
      { ok: true, patch: { status: "cancelled", completedAt: now, statusReason: "x" }, stopOnNode: false },
    ],
    ["already completed", { ...base, status: "completed" }, "x", { ok: false, reason: "finished" }],
  ])("gpu-scheduler admin - %s", (_name, job, reason, outcome) => expect(cancelJob(job, now, reason)).toEqual(outcome));
});

describe("admin audit - the entry of an action", () => {
  test.each<[string, unknown, unknown, Record<string, unknown>, string]>([
    ["done", { nodeId: "gpu-node.a" }, undefined, { nodeId: "gpu-node.a" }, "ok"],
    ["refused with a code", { id: "j" }, { type: "NOT_FOUND", name: "MoleculerClientError" }, { id: "j" }, "NOT_FOUND"],
    ["failed without a code", undefined, new Error("boom"), {}, "Error"],
  ])("admin audit - %s", (_name, params, err, target, outcome) => {
    const entry = auditEntry("admin.drainNode", "admin-1", params, err);
    expect(entry).toEqual({ adminId: "admin-1", action: "admin.drainNode", target, outcome });
    expect(auditLine(entry)).toBe(`admin audit: admin-1 admin.drainNode ${JSON.stringify(target)} -> ${outcome}`);
  });
});
