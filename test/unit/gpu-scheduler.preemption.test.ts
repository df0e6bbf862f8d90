import { plan, QueuedJob, Snapshot, SnapshotCard } from "../../services/gpu-scheduler/core/placement";
import { fewestWasted, PreemptibleHolder } from "../../services/gpu-scheduler/core/preemption";

const RTX = "NVIDIA GeForce RTX 3060";
const A100 = "NVIDIA A100-SXM4-80GB";
const card = (nodeId: string, uuid: string, busy = false, name = RTX): SnapshotCard => ({ nodeId, uuid, name, busy });
const job = (jobId: string, seq: number, extra: Partial<QueuedJob> = {}): QueuedJob => ({ jobId, seq, gpuType: null, ...extra });
const cheap = (jobId: string, seq: number, extra: Partial<QueuedJob> = {}) => job(jobId, seq, { preemptible: true, ...extra });
/** A preemptible job holding `uuids` on `nodeId`, placed at `since` (larger: younger). */
const holder = (jobId: string, nodeId: string, uuids: string[], since: number, preempting = false): PreemptibleHolder => ({
  jobId,
  nodeId,
  gpuUuids: uuids,
  since,
  preempting,
});

type Case = {
  name: string;
  snapshot: Snapshot;
  placements: Array<[jobId: string, gpuUuid: string]>;
  waiting: Array<[jobId: string, reason: string]>;
  preempted: string[];
};

const cases: Case[] = [
  {
    name: "preemptible jobs run on idle cards",
    snapshot: { cards: [card("n1", "g1"), card("n1", "g2")], queue: [cheap("p1", 1), cheap("p2", 2)] },
    placements: [
      ["p1", "g1"],
      ["p2", "g2"],
    ],
    waiting: [],
    preempted: [],
  },
  {
    name: "an ordinary job goes first, whatever its age: the preemptible one takes what is left",
    snapshot: { cards: [card("n1", "g1")], queue: [cheap("p1", 1), job("a", 2)] },
    placements: [["a", "g1"]],
    waiting: [["p1", "MATCHING_GPUS_BUSY"]],
    preempted: [],
  },
  {
    name: "a waiting ordinary job stops the youngest preemptible job on a card it could use",
    snapshot: {
      cards: [card("n1", "g1", true), card("n1", "g2", true)],
      queue: [job("a", 3)],
      preemptible: [holder("old", "n1", ["g1"], 100), holder("young", "n1", ["g2"], 200)],
    },
    placements: [],
    waiting: [["a", "PREEMPTING"]],
    preempted: ["young"],
  },
  {
    name: "fewest cards wasted beats youngest: a 2-card job stops the 2-card holder, not two 1-card ones",
    snapshot: {
      cards: [card("n1", "g1", true), card("n1", "g2", true), card("n1", "g3", true), card("n1", "g4", true)],
      queue: [job("a", 3, { gpuCount: 2 })],
      preemptible: [holder("pair", "n1", ["g1", "g2"], 100), holder("y1", "n1", ["g3"], 300), holder("y2", "n1", ["g4"], 200)],
    },
    placements: [],
    waiting: [["a", "PREEMPTING"]],
    preempted: ["y1", "y2"],
  },
  {
    name: "fewest cards wasted: a 1-card job stops a 1-card holder, not an older or younger 4-card one",
    snapshot: {
      cards: [card("n1", "g1", true), card("n1", "g2", true), card("n1", "g3", true), card("n1", "g4", true), card("n2", "h1", true)],
      queue: [job("a", 3)],
      preemptible: [holder("big", "n1", ["g1", "g2", "g3", "g4"], 500), holder("small", "n2", ["h1"], 100)],
    },
    placements: [],
    waiting: [["a", "PREEMPTING"]],
    preempted: ["small"],
  },
  {
    name: "a free card and a stopped one together: the gang stops only what it lacks",
    snapshot: {
      cards: [card("n1", "g1"), card("n1", "g2", true), card("n1", "g3", true)],
      queue: [job("a", 3, { gpuCount: 2 })],
      preemptible: [holder("p", "n1", ["g2"], 100), holder("q", "n1", ["g3"], 200)],
    },
    placements: [],
    waiting: [["a", "PREEMPTING"]],
    preempted: ["q"],
  },
  {
    name: "jobs already being stopped count as coming free: nothing more is stopped",
    snapshot: {
      cards: [card("n1", "g1", true), card("n1", "g2", true)],
      queue: [job("a", 3)],
      preemptible: [holder("going", "n1", ["g1"], 100, true), holder("stays", "n1", ["g2"], 200)],
    },
    placements: [],
    waiting: [["a", "PREEMPTING"]],
    preempted: [],
  },
  {
    name: "two waiting jobs stop two different holders",
    snapshot: {
      cards: [card("n1", "g1", true), card("n1", "g2", true)],
      queue: [job("a", 3), job("b", 4)],
      preemptible: [holder("p1", "n1", ["g1"], 100), holder("p2", "n1", ["g2"], 200)],
    },
    placements: [],
    waiting: [
      ["a", "PREEMPTING"],
      ["b", "PREEMPTING"],
    ],
    preempted: ["p2", "p1"],
  },
  {
    name: "only cards the job could use: an A100 job does not stop a preemptible job on an RTX",
    snapshot: {
      cards: [card("n1", "g1", true), card("n2", "a1", true, A100)],
      queue: [job("a", 3, { gpuType: "A100" })],
      preemptible: [holder("rtx", "n1", ["g1"], 100)],
    },
    placements: [],
    waiting: [["a", "MATCHING_GPUS_BUSY"]],
    preempted: [],
  },
  {
    name: "a preemptible job never stops another",
    snapshot: { cards: [card("n1", "g1", true)], queue: [cheap("p2", 3)], preemptible: [holder("p1", "n1", ["g1"], 100)] },
    placements: [],
    waiting: [["p2", "MATCHING_GPUS_BUSY"]],
    preempted: [],
  },
  {
    name: "a set reserved for a preemption is not taken by a preemptible job of the same pass",
    snapshot: {
      cards: [card("n1", "g1"), card("n1", "g2", true)],
      queue: [job("a", 3, { gpuCount: 2 }), cheap("p2", 4)],
      preemptible: [holder("p1", "n1", ["g2"], 100)],
    },
    placements: [],
    waiting: [
      ["a", "PREEMPTING"],
      ["p2", "MATCHING_GPUS_BUSY"],
    ],
    preempted: ["p1"],
  },
];

describe("gpu-scheduler preemption - plan table", () => {
  test.each(cases)("$name", ({ snapshot, placements, waiting, preempted }) => {
    const result = plan(snapshot);
    expect(result.placements.map((p) => [p.jobId, p.gpuUuid])).toEqual(placements);
    expect(result.waiting.map((w) => [w.jobId, w.reason])).toEqual(waiting);
    expect(result.preemptions.map((p) => p.jobId)).toEqual(preempted);
  });
});

describe("gpu-scheduler preemption - fewest cards wasted", () => {
  const h = (id: string, cards: number, since: number) =>
    holder(
      id,
      "n1",
      Array.from({ length: cards }, (_, i) => `${id}-${i}`),
      since,
    );
  test.each([
    ["exact fit with one job", [h("a", 2, 1), h("b", 1, 2), h("c", 1, 3)], 2, ["c", "b"]],
    ["exact fit prefers the youngest mix", [h("a", 2, 3), h("b", 1, 2), h("c", 1, 1)], 2, ["a"]],
    ["no exact fit: the least over", [h("a", 4, 1), h("b", 3, 2)], 2, ["b"]],
    ["not enough cards", [h("a", 1, 1)], 2, null],
    ["nothing needed", [h("a", 1, 1)], 0, []],
  ])("%s", (_name, holders, need, expected) => {
    const chosen = fewestWasted(holders as PreemptibleHolder[], need as number);
    expect(chosen && chosen.map((c) => c.jobId)).toEqual(expected);
  });
});
