import { matchesGpuType, requestedGpuType } from "../../services/gpu-scheduler/core/gpu-type";
import { AccountShare, plan, QueueAccount, QueuedJob, queuePosition, Snapshot, SnapshotCard, walkFair } from "../../services/gpu-scheduler/core/placement";

const RTX = "NVIDIA GeForce RTX 3060";
const A100 = "NVIDIA A100-SXM4-80GB";
const card = (nodeId: string, uuid: string, name = RTX, busy = false): SnapshotCard => ({ nodeId, uuid, name, busy });
const job = (jobId: string, seq: number, gpuType: string | null = null): QueuedJob => ({ jobId, seq, gpuType });
/** A job of account `clientId` with `priority` (0 low, 1 normal, 2 high). */
const of = (clientId: string, jobId: string, seq: number, priority = 1): QueuedJob => ({ jobId, seq, gpuType: null, clientId, priority });
const share = (usage: number, held = 0, weight = 1, runningGpus: number | null = null): AccountShare => ({ usage, held, weight, runningGpus });

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
    name: "many nodes: best fit, the node left with the fewest free cards first, ties by node id",
    snapshot: {
      cards: [card("n1", "a1"), card("n1", "a2"), card("n2", "b1"), card("n2", "b2"), card("n3", "c1")],
      queue: [job("j1", 1), job("j2", 2), job("j3", 3)],
    },
    // n3 (1 free) fills first, then n1 and n2 tie at 2 (n1 by id), then n1's last card.
    placements: [
      ["j1", "c1"],
      ["j2", "a1"],
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
    placements: [["j1", "a3"]],
    waiting: [],
  },
  {
    name: "fair share: a busy account's 50 queued jobs do not delay another account's single job",
    snapshot: {
      cards: [card("n1", "g1")],
      queue: [...Array.from({ length: 50 }, (_, i) => of("a", `a${i}`, i + 1)), of("b", "b0", 51)],
      accounts: new Map([["a", share(30)]]),
    },
    placements: [["b0", "g1"]],
    waiting: Array.from({ length: 50 }, (_, i): [string, string] => [`a${i}`, "MATCHING_GPUS_BUSY"]),
  },
  {
    name: "fair share: an account that holds a GPU goes after one holding none",
    snapshot: { cards: [card("n1", "g1"), card("n1", "g2", RTX, true)], queue: [of("a", "a1", 1), of("b", "b1", 2)], accounts: new Map([["a", share(0, 1)]]) },
    placements: [["b1", "g1"]],
    waiting: [["a1", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "fair share: an account that has used nothing goes before one that has, whatever the age",
    snapshot: { cards: [card("n1", "g1")], queue: [of("a", "a1", 1), of("z", "z1", 2)], accounts: new Map([["a", share(0.5)]]) },
    placements: [["z1", "g1"]],
    waiting: [["a1", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "fair share: smaller decayed usage first; each card placed counts for its account",
    snapshot: {
      cards: [card("n1", "g1"), card("n1", "g2"), card("n1", "g3")],
      queue: [of("a", "a1", 1), of("a", "a2", 2), of("b", "b1", 3), of("b", "b2", 4)],
      accounts: new Map([
        ["a", share(1.5)],
        ["b", share(1)],
      ]),
    },
    // b (1) → b1; b (2) vs a (1.5) → a1; a (2.5) vs b (2) → b2
    placements: [
      ["b1", "g1"],
      ["a1", "g2"],
      ["b2", "g3"],
    ],
    waiting: [["a2", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "fair share: usage is divided by the weight",
    snapshot: {
      cards: [card("n1", "g1")],
      queue: [of("a", "a1", 1), of("b", "b1", 2)],
      accounts: new Map([
        ["a", share(100, 0, 1)],
        ["b", share(150, 0, 2)],
      ]),
    },
    placements: [["b1", "g1"]],
    waiting: [["a1", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "priority: within an account high before normal before low, then age",
    snapshot: { cards: [card("n1", "g1"), card("n1", "g2")], queue: [of("a", "low", 1, 0), of("a", "normal", 2, 1), of("a", "high", 3, 2)] },
    placements: [
      ["high", "g1"],
      ["normal", "g2"],
    ],
    waiting: [["low", "MATCHING_GPUS_BUSY"]],
  },
  {
    name: "running-GPU limit: an account at its limit waits with ACCOUNT_LIMIT; the card goes to another",
    snapshot: {
      cards: [card("n1", "g1"), card("n1", "g2"), card("n1", "g3")],
      queue: [of("a", "a1", 1), of("a", "a2", 2), of("a", "a3", 3), of("b", "b1", 4)],
      accounts: new Map([["a", share(0, 0, 1, 1)]]),
    },
    placements: [
      ["a1", "g1"],
      ["b1", "g2"],
    ],
    waiting: [
      ["a2", "ACCOUNT_LIMIT"],
      ["a3", "ACCOUNT_LIMIT"],
    ],
  },
  {
    name: "GPU-seconds reserved at placement: placed while the quota left is above 0, each taking its timeout × cards; another account unaffected",
    snapshot: {
      cards: [card("n1", "g1"), card("n1", "g2"), card("n1", "g3"), card("n1", "g4")],
      queue: [
        { ...of("a", "a1", 1), timeoutSeconds: 60 },
        { ...of("a", "a2", 2), timeoutSeconds: 60 },
        { ...of("a", "a3", 3), timeoutSeconds: 60 },
        { ...of("b", "b1", 4), timeoutSeconds: 60 },
      ],
      accounts: new Map([
        ["a", { ...share(0), gpuSecondsLeft: 100 }],
        ["b", { ...share(0), gpuSecondsLeft: 1 }],
      ]),
    },
    placements: [
      ["a1", "g1"],
      ["b1", "g2"],
      ["a2", "g3"],
    ],
    waiting: [["a3", "QUOTA_EXCEEDED"]],
  },
  {
    name: "GPU-seconds reserved at placement: nothing left after the running jobs' worst case, the job waits",
    snapshot: {
      cards: [card("n1", "g1")],
      queue: [{ ...of("a", "a1", 1), timeoutSeconds: 1 }],
      accounts: new Map([["a", { ...share(0), gpuSecondsLeft: 0 }]]),
    },
    placements: [],
    waiting: [["a1", "QUOTA_EXCEEDED"]],
  },
  {
    name: "credits reserved at placement: each job takes its timeout × cards × its card's price; placed while some are left",
    snapshot: {
      cards: [card("n1", "g1", "Cheap"), card("n1", "g2", "Dear"), card("n1", "g3", "Dear")],
      queue: [
        { ...of("a", "a1", 1), gpuType: "Cheap", timeoutSeconds: 10 },
        { ...of("a", "a2", 2), gpuType: "Dear", timeoutSeconds: 10 },
        { ...of("a", "a3", 3), gpuType: "Dear", timeoutSeconds: 10 },
      ],
      // 10 credits left: a1 reserves 10 × 0.1 = 1 (9 left), a2 10 × 1 = 10 (-1 left), a3 waits.
      accounts: new Map([["a", { ...share(0), creditsLeft: 10, creditsPerGpuSecond: (name: string) => (name === "Dear" ? 1 : 0.1) }]]),
    },
    placements: [
      ["a1", "g1"],
      ["a2", "g2"],
    ],
    waiting: [["a3", "QUOTA_EXCEEDED"]],
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

/** A job of `gpuCount` cards (of account `clientId`, default the shared one). */
const gang = (jobId: string, seq: number, gpuCount: number, gpuType: string | null = null, clientId?: string): QueuedJob => ({
  jobId,
  seq,
  gpuType,
  gpuCount,
  ...(clientId && { clientId }),
});
/** `n` cards of node `nodeId` named `<prefix>1`…, the listed indexes (1-based) busy. */
const node = (nodeId: string, prefix: string, n: number, busy: number[] = [], name = RTX) =>
  Array.from({ length: n }, (_, i) => card(nodeId, `${prefix}${i + 1}`, name, busy.includes(i + 1)));

type GangCase = {
  name: string;
  snapshot: Snapshot;
  placements: Array<[jobId: string, gpuUuids: string[]]>;
  waiting: Array<[jobId: string, reason: string, needed?: number]>;
};

const gangCases: GangCase[] = [
  {
    name: "gangs: a 2-card job takes two free cards of the one node that has them",
    snapshot: { cards: [...node("n1", "a", 3, [2]), ...node("n2", "b", 2, [1])], queue: [gang("g", 1, 2)] },
    placements: [["g", ["a1", "a3"]]],
    waiting: [],
  },
  {
    name: "gangs: 2 + 2 free cards on two nodes never make a 4-card job; a later 1-card job runs beside it",
    snapshot: { cards: [...node("n1", "a", 4, [3, 4]), ...node("n2", "b", 4, [3, 4])], queue: [gang("g4", 1, 4), job("one", 2)] },
    // g4 reserves n1 (nearest to fitting, ties by node id): the 1-card job goes to n2.
    placements: [["one", ["b1"]]],
    waiting: [["g4", "MATCHING_GPUS_BUSY", 4]],
  },
  {
    name: "gangs: more cards than any node has waits with NO_NODE_BIG_ENOUGH, reserving nothing",
    snapshot: { cards: [...node("n1", "a", 2), ...node("n2", "b", 2)], queue: [gang("g3", 1, 3), job("one", 2)] },
    placements: [["one", ["a1"]]],
    waiting: [["g3", "NO_NODE_BIG_ENOUGH", 3]],
  },
  {
    name: "gangs: best fit keeps a whole node for a later big job",
    snapshot: { cards: [...node("n1", "a", 4), ...node("n2", "b", 4, [1])], queue: [job("one", 1), gang("big", 2, 4)] },
    placements: [
      ["one", ["b2"]],
      ["big", ["a1", "a2", "a3", "a4"]],
    ],
    waiting: [],
  },
  {
    name: "gangs: mixed sizes fill one node in order; the first gang that does not fit holds the rest of its node",
    snapshot: { cards: node("n1", "a", 8), queue: [gang("three", 1, 3), gang("two", 2, 2), gang("four", 3, 4), job("one", 4)] },
    placements: [
      ["three", ["a1", "a2", "a3"]],
      ["two", ["a4", "a5"]],
    ],
    waiting: [
      ["four", "MATCHING_GPUS_BUSY", 4],
      ["one", "MATCHING_GPUS_BUSY"],
    ],
  },
  {
    name: "gangs: mixed sizes over two nodes: small jobs fill the partly used node, the gang gets the whole one",
    snapshot: { cards: [...node("n1", "a", 4, [1]), ...node("n2", "b", 4)], queue: [job("s1", 1), job("s2", 2), gang("g4", 3, 4), job("s3", 4)] },
    placements: [
      ["s1", ["a2"]],
      ["s2", ["a3"]],
      ["g4", ["b1", "b2", "b3", "b4"]],
      ["s3", ["a4"]],
    ],
    waiting: [],
  },
  {
    name: "gangs: the running-GPU limit counts cards: 1 held + 4 > 3 waits, 1 held + 2 fits",
    snapshot: {
      cards: node("n1", "a", 8),
      queue: [gang("big", 1, 4, null, "a"), gang("pair", 2, 2, null, "a"), gang("other", 3, 3, null, "b")],
      accounts: new Map([["a", share(0, 1, 1, 3)]]),
    },
    // b (holding nothing) goes first.
    placements: [
      ["other", ["a1", "a2", "a3"]],
      ["pair", ["a4", "a5"]],
    ],
    waiting: [["big", "ACCOUNT_LIMIT", 4]],
  },
  {
    name: "gangs: gpuType picks cards of that name only; one name per job",
    snapshot: {
      cards: [card("n1", "x1", A100), card("n1", "x2", A100), card("n1", "r1"), card("n1", "r2"), card("n2", "m1", A100), card("n2", "m2")],
      queue: [gang("rtx", 1, 2, "rtx 3060"), gang("a100", 2, 3, "A100"), gang("any", 3, 2)],
    },
    // No node has 3 A100s; "any" cannot mix the A100 and RTX of n2 but takes n1's two A100s.
    placements: [
      ["rtx", ["r1", "r2"]],
      ["any", ["x1", "x2"]],
    ],
    waiting: [["a100", "NO_NODE_BIG_ENOUGH", 3]],
  },
  {
    name: "gangs: fair share counts a gang's cards: after a 4-card start the last card goes to the other account",
    snapshot: {
      cards: node("n1", "a", 5),
      queue: [gang("a-gang", 1, 4, null, "a"), gang("a-one", 2, 1, null, "a"), gang("b-one", 3, 1, null, "b")],
      accounts: new Map([["b", share(3.5)]]),
    },
    placements: [
      ["a-gang", ["a1", "a2", "a3", "a4"]],
      ["b-one", ["a5"]],
    ],
    waiting: [["a-one", "MATCHING_GPUS_BUSY"]],
  },
];

describe("gpu-scheduler placement - gangs", () => {
  test.each(gangCases)("$name", ({ snapshot, placements, waiting }) => {
    const result = plan(snapshot);
    expect(result.placements.map((p) => [p.jobId, p.gpuUuids])).toEqual(placements);
    expect(result.waiting.map((w) => (w.needed ? [w.jobId, w.reason, w.needed] : [w.jobId, w.reason]))).toEqual(waiting);
    const byUuid = new Map(snapshot.cards.map((c) => [c.uuid, c]));
    for (const p of result.placements) {
      expect(p.gpuUuid).toBe(p.gpuUuids[0]);
      expect(new Set(p.gpuUuids.map((u) => `${byUuid.get(u)!.nodeId}/${byUuid.get(u)!.name}`))).toEqual(
        new Set([`${p.nodeId}/${byUuid.get(p.gpuUuid)!.name}`]),
      );
    }
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

describe("gpu-scheduler placement - gang invariants", () => {
  test("gpu-scheduler placement - random snapshots with gangs: k free cards of one name on one node, each card once", () => {
    const names = [RTX, A100];
    const types = [null, "rtx", "A100", "H100"];
    const random = rng(11);
    for (let round = 0; round < 300; round++) {
      const cards = Array.from({ length: Math.floor(random() * 16) }, (_, i) =>
        card(`n${Math.floor(random() * 3)}`, `g${round}-${i}`, names[Math.floor(random() * names.length)], random() < 0.3),
      );
      const queue = Array.from({ length: Math.floor(random() * 10) }, (_, i) =>
        gang(`j${i}`, i + 1, 1 + Math.floor(random() * 4), types[Math.floor(random() * types.length)], `acct${Math.floor(random() * 3)}`),
      );
      const limit = Math.floor(random() * 6);
      const accounts = new Map([["acct0", share(0, 0, 1, limit)]]);
      const { placements, waiting } = plan({ cards, queue, accounts });
      const byUuid = new Map(cards.map((c) => [c.uuid, c]));
      const byJob = new Map(queue.map((j) => [j.jobId, j]));
      expect([...placements.map((p) => p.jobId), ...waiting.map((w) => w.jobId)].sort()).toEqual(queue.map((j) => j.jobId).sort());
      const used = placements.flatMap((p) => p.gpuUuids);
      expect(new Set(used).size).toBe(used.length);
      for (const p of placements) {
        const wanted = byJob.get(p.jobId)!;
        expect(p.gpuUuids).toHaveLength(wanted.gpuCount!);
        const mine = p.gpuUuids.map((u) => byUuid.get(u)!);
        expect(mine.every((c) => !c.busy && c.nodeId === p.nodeId && c.name === mine[0].name && matchesGpuType(c.name, wanted.gpuType))).toBe(true);
      }
      // The limited account never holds more than its limit.
      const held0 = placements.filter((p) => byJob.get(p.jobId)!.clientId === "acct0").reduce((n, p) => n + p.gpuUuids.length, 0);
      expect(held0).toBeLessThanOrEqual(limit);
      // A gang waiting for lack of a big enough node really has none.
      for (const w of waiting.filter((w) => w.reason === "NO_NODE_BIG_ENOUGH")) {
        const wanted = byJob.get(w.jobId)!;
        const sizes = new Map<string, number>();
        for (const c of cards.filter((c) => matchesGpuType(c.name, wanted.gpuType)))
          sizes.set(`${c.nodeId}/${c.name}`, (sizes.get(`${c.nodeId}/${c.name}`) ?? 0) + 1);
        expect(Math.max(0, ...sizes.values())).toBeLessThan(wanted.gpuCount!);
      }
    }
  });
});

describe("gpu-scheduler placement - queue positions", () => {
  test("gpu-scheduler placement - queuePosition of every job is its place in the fair order, for random queues", () => {
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    for (let round = 0; round < 200; round++) {
      const ids = ["a", "b", "c", "d"].slice(0, 1 + Math.floor(random() * 4));
      const accounts = new Map(
        ids.map((id) => [id, share(Math.floor(random() * 4) * (random() < 0.5 ? 1 : 0.5), Math.floor(random() * 3), 1 + Math.floor(random() * 3))]),
      );
      const queue = Array.from({ length: Math.floor(random() * 20) }, (_, i) =>
        of(ids[Math.floor(random() * ids.length)], `j${i}`, i + 1, Math.floor(random() * 3)),
      );
      const order: string[] = [];
      walkFair(queue, accounts, (j) => (order.push(j.jobId), true));
      const rows: QueueAccount[] = ids.map((id) => ({ clientId: id, ...accounts.get(id)!, queued: queue.filter((j) => j.clientId === id).length }));
      for (const j of queue) {
        const ahead = queue.filter((o) => o.clientId === j.clientId && (o.priority! > j.priority! || (o.priority === j.priority && o.seq < j.seq))).length;
        expect(queuePosition({ clientId: j.clientId!, ahead }, rows)).toBe(order.indexOf(j.jobId) + 1);
      }
    }
  });
});
