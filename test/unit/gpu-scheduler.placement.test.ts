import { matchesGpuType, requestedGpuType } from "../../services/gpu-scheduler/gpu-type";
import { plan, QueuedJob, Snapshot, SnapshotCard } from "../../services/gpu-scheduler/placement";

const RTX = "NVIDIA GeForce RTX 3060";
const A100 = "NVIDIA A100-SXM4-80GB";
const card = (nodeId: string, uuid: string, name = RTX, busy = false): SnapshotCard => ({ nodeId, uuid, name, busy });
const job = (jobId: string, seq: number, gpuType: string | null = null): QueuedJob => ({ jobId, seq, gpuType });

type Case = {
  name: string;
  snapshot: Snapshot;
  placements: Array<[jobId: string, gpuUuid: string]>;
  waiting: Array<[jobId: string, reason: string]>;
};

const cases: Case[] = [
  {
    name: "FIFO: the oldest job gets the only free card, whatever order the queue arrives in",
    snapshot: { cards: [card("n1", "g1")], queue: [job("late", 2), job("early", 1)] },
    placements: [["early", "g1"]],
    waiting: [["late", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "FIFO: jobs take free cards in arrival order until none is left",
    snapshot: { cards: [card("n1", "g1"), card("n1", "g2")], queue: [job("a", 1), job("b", 2), job("c", 3)] },
    placements: [
      ["a", "g1"],
      ["b", "g2"],
    ],
    waiting: [["c", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "type matching: a part of the card name, case-insensitive",
    snapshot: { cards: [card("n1", "g1", A100), card("n1", "g2", RTX)], queue: [job("a", 1, "rtx 3060")] },
    placements: [["a", "g2"]],
    waiting: [],
  },
  {
    name: "type matching: a type no card has waits with NO_MATCHING_GPU",
    snapshot: { cards: [card("n1", "g1")], queue: [job("a", 1, "H100")] },
    placements: [],
    waiting: [["a", "NO_MATCHING_GPU"]],
  },
  {
    name: 'type matching: "any" and no type both take any card',
    snapshot: { cards: [card("n1", "g1"), card("n1", "g2", A100)], queue: [job("a", 1, "any"), job("b", 2, null)] },
    placements: [
      ["a", "g1"],
      ["b", "g2"],
    ],
    waiting: [],
  },
  {
    name: "busy cards: never used, the job waits with MATCHING_GPUS_BUSY",
    snapshot: { cards: [card("n1", "g1", RTX, true), card("n1", "g2", RTX, true)], queue: [job("a", 1)] },
    placements: [],
    waiting: [["a", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "busy cards: only the free one is used",
    snapshot: { cards: [card("n1", "g1", RTX, true), card("n2", "g2", RTX, false)], queue: [job("a", 1), job("b", 2)] },
    placements: [["a", "g2"]],
    waiting: [["b", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "no cards: every job waits with NO_GPUS",
    snapshot: { cards: [], queue: [job("a", 1), job("b", 2, "A100")] },
    placements: [],
    waiting: [
      ["a", "NO_GPUS"],
      ["b", "NO_GPUS"],
    ],
  },
  {
    name: "no queue: an empty plan",
    snapshot: { cards: [card("n1", "g1")], queue: [] },
    placements: [],
    waiting: [],
  },
  {
    name: "no head-of-line blocking: a job waiting for a busy type does not hold back a later job",
    snapshot: { cards: [card("n1", "g1", A100, true), card("n1", "g2", RTX)], queue: [job("a100", 1, "A100"), job("any", 2)] },
    placements: [["any", "g2"]],
    waiting: [["a100", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "FIFO within a type: the older of two RTX jobs gets the RTX card, the A100 job its own",
    snapshot: {
      cards: [card("n1", "g1", RTX), card("n2", "g2", A100)],
      queue: [job("rtx-1", 1, "RTX"), job("a100", 2, "A100"), job("rtx-2", 3, "RTX")],
    },
    placements: [
      ["rtx-1", "g1"],
      ["a100", "g2"],
    ],
    waiting: [["rtx-2", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: 'scarce types: an "any" job leaves the card a later specific job asked for',
    snapshot: { cards: [card("n1", "g1", RTX), card("n1", "g2", A100)], queue: [job("any", 1), job("rtx", 2, "3060")] },
    placements: [
      ["any", "g2"],
      ["rtx", "g1"],
    ],
    waiting: [],
  },
  {
    name: "many nodes: jobs spread over nodes (most free cards first), ties by node id",
    snapshot: {
      cards: [card("n1", "a1"), card("n1", "a2"), card("n2", "b1"), card("n2", "b2"), card("n3", "c1")],
      queue: [job("j1", 1), job("j2", 2), job("j3", 3)],
    },
    placements: [
      ["j1", "a1"],
      ["j2", "b1"],
      ["j3", "a2"],
    ],
    waiting: [],
  },
  {
    name: "many nodes: a node with busy cards counts only its free ones",
    snapshot: {
      cards: [card("n1", "a1", RTX, true), card("n1", "a2", RTX, true), card("n1", "a3"), card("n2", "b1"), card("n2", "b2")],
      queue: [job("j1", 1)],
    },
    placements: [["j1", "b1"]],
    waiting: [],
  },
];

describe("gpu-scheduler placement - table", () => {
  test.each(cases)("$name", ({ snapshot, placements, waiting }) => {
    const result = plan(snapshot);
    expect(result.placements.map((p) => [p.jobId, p.gpuUuid])).toEqual(placements);
    expect(result.waiting.map((w) => [w.jobId, w.reason])).toEqual(waiting);
    const byUuid = new Map(snapshot.cards.map((c) => [c.uuid, c]));
    for (const p of result.placements) expect(byUuid.get(p.gpuUuid)!.nodeId).toBe(p.nodeId);
  });
});

describe("gpu-scheduler placement - type names", () => {
  test.each([
    ["RTX 3060", RTX, true],
    ["rtx  3060", RTX, true],
    ["GeForce", RTX, true],
    ["3090", RTX, false],
    ["A100", A100, true],
    ["any", A100, true],
    [null, A100, true],
  ] as const)("gpu-scheduler placement - %p matches %p: %p", (wanted, name, expected) => {
    expect(matchesGpuType(name, wanted)).toBe(expected);
  });

  test.each([
    ["A100", "A100"],
    ["any", null],
    ["ANY", null],
    [" Any ", null],
    ["", null],
    [null, null],
    [undefined, null],
  ] as const)("gpu-scheduler placement - a job asking for %p is stored as %p", (asked, stored) => {
    expect(requestedGpuType(asked)).toBe(stored);
  });
});

/** A small deterministic generator, so a failing case can be replayed. */
function rng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

describe("gpu-scheduler placement - invariants", () => {
  test("gpu-scheduler placement - 100 nodes x 8 cards and 1,000 jobs: the oldest 800 placed, each card once", () => {
    const cards = Array.from({ length: 800 }, (_, i) => card(`node-${String(Math.floor(i / 8)).padStart(3, "0")}`, `gpu-${i}`));
    const queue = Array.from({ length: 1000 }, (_, i) => job(`job-${i}`, 1000 - i)); // newest first on purpose
    const started = process.hrtime.bigint();
    const result = plan({ cards, queue });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    expect(result.placements).toHaveLength(800);
    expect(new Set(result.placements.map((p) => p.gpuUuid)).size).toBe(800);
    const placedSeqs = result.placements.map((p) => 1000 - Number(p.jobId.slice(4)));
    expect(Math.max(...placedSeqs)).toBe(800);
    expect(result.waiting).toHaveLength(200);
    expect(ms).toBeLessThan(2000); // generous: the plan must not be quadratic in anything large
  });

  test("gpu-scheduler placement - random snapshots keep every rule", () => {
    const names = [RTX, A100, "NVIDIA H100 80GB HBM3"];
    const types = [null, "rtx", "A100", "H100", "V100", "nvidia"];
    const random = rng(42);
    for (let round = 0; round < 200; round++) {
      const cards = Array.from({ length: Math.floor(random() * 12) }, (_, i) =>
        card(`n${Math.floor(random() * 4)}`, `g${round}-${i}`, names[Math.floor(random() * names.length)], random() < 0.4),
      );
      const queue = Array.from({ length: Math.floor(random() * 15) }, (_, i) => job(`j${i}`, i + 1, types[Math.floor(random() * types.length)]));
      const { placements, waiting } = plan({ cards, queue });
      const byUuid = new Map(cards.map((c) => [c.uuid, c]));
      const byJob = new Map(queue.map((j) => [j.jobId, j]));
      // Every job is either placed or waiting, once.
      expect([...placements.map((p) => p.jobId), ...waiting.map((w) => w.jobId)].sort()).toEqual(queue.map((j) => j.jobId).sort());
      // A card once, never a busy one, always a matching one.
      expect(new Set(placements.map((p) => p.gpuUuid)).size).toBe(placements.length);
      for (const p of placements) {
        const c = byUuid.get(p.gpuUuid)!;
        expect(c.busy).toBe(false);
        expect(matchesGpuType(c.name, byJob.get(p.jobId)!.gpuType)).toBe(true);
      }
      // No waiting job could have used a card that a later job got, nor a card left free.
      const used = new Set(placements.map((p) => p.gpuUuid));
      for (const w of waiting) {
        const wanted = byJob.get(w.jobId)!;
        for (const c of cards.filter((c) => !c.busy && matchesGpuType(c.name, wanted.gpuType))) {
          expect(used.has(c.uuid)).toBe(true);
          const taker = byJob.get(placements.find((p) => p.gpuUuid === c.uuid)!.jobId)!;
          expect(taker.seq).toBeLessThan(wanted.seq);
        }
      }
    }
  });
});
