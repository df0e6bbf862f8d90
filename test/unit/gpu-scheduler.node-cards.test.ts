/** Which announced cards of a node take jobs (node-cards.ts, card-vetting.ts): pinning, GPU_NODE_CARDS, the view and the counts (tables). */
import type { GpuCard, NodeHeartbeat } from "../../lib/gpu-protocol";
import { CardVetting, PinStore } from "../../services/gpu-scheduler/loop/card-vetting";
import { ClusterView } from "../../services/gpu-scheduler/core/cluster-view";
import { CardAllowance, cardStanding, parseNodeCards, PinnedCard, pinOf } from "../../services/gpu-scheduler/core/node-cards";
import { heldCardCounts } from "../../services/gpu-scheduler/stats";
import { testCard } from "../support/gpu-card";

const card = testCard;
const pins = (...cards: GpuCard[]) => new Map(cards.map((c) => [c.uuid, pinOf(c)]));
const A = card("GPU-a", 0);
const H1 = card("GPU-h1", 1, "NVIDIA H100 80GB HBM3", 81559);
const H2 = card("GPU-h2", 2, "NVIDIA H100 80GB HBM3", 81559);
/** `uuid:reason` of every held card, and the usable uuids. */
const standingOf = (cards: GpuCard[], pinned: Map<string, PinnedCard> | null, allowance?: CardAllowance[]) => {
  const s = cardStanding(cards, pinned, allowance);
  return { usable: s.usable.map((c) => c.uuid), held: s.held.map((c) => `${c.uuid}:${c.reason}`) };
};

describe("gpu-scheduler node cards - pinning and the operator's allowance", () => {
  test.each<[string, GpuCard[], Map<string, PinnedCard> | null, CardAllowance[] | undefined, string[], string[]]>([
    ["no pinning, no bound: every card", [A, H1], null, undefined, ["GPU-a", "GPU-h1"], []],
    ["the cards it registered: every card", [A, H1], pins(A, H1), undefined, ["GPU-a", "GPU-h1"], []],
    ["new cards beside the registered one: pending", [A, H1, H2], pins(A), undefined, ["GPU-a"], ["GPU-h1:pending", "GPU-h2:pending"]],
    ["a registered uuid now claiming another name: pending", [{ ...A, name: "NVIDIA H100" }], pins(A), undefined, [], ["GPU-a:pending"]],
    ["a registered uuid now claiming more memory: pending", [{ ...A, memoryTotal: 81559 }], pins(A), undefined, [], ["GPU-a:pending"]],
    ["live telemetry changes nothing", [{ ...A, memoryUsed: 900, utilization: 99, temperature: 80 }], pins(A), undefined, ["GPU-a"], []],
    ["a registered card gone: the rest stay", [H1], pins(A, H1), undefined, ["GPU-h1"], []],
    ["nothing pinned yet (unknown): all pending", [A], new Map(), undefined, [], ["GPU-a:pending"]],
    [
      "allowance by count: the first by index",
      [H2, A, H1],
      null,
      [
        { type: "test gpu", count: 1 },
        { type: "H100", count: 1 },
      ],
      ["GPU-a", "GPU-h1"],
      ["GPU-h2:not-allowed"],
    ],
    ["allowance of another type only", [A, H1], null, [{ type: "A100", count: 4 }], [], ["GPU-a:not-allowed", "GPU-h1:not-allowed"]],
    ["an empty allowance: no card", [A], null, [], [], ["GPU-a:not-allowed"]],
    ["a pending card spends no allowance", [A, H1], pins(H1), [{ type: "any", count: 1 }], ["GPU-h1"], ["GPU-a:pending"]],
    ["pinned and bound together", [A, H1, H2], pins(A, H1, H2), [{ type: "H100", count: 1 }], ["GPU-h1"], ["GPU-a:not-allowed", "GPU-h2:not-allowed"]],
    [
      "an accepted uuid announced three times: one card, the first by index",
      [A, { ...A, index: 1 }, { ...A, index: 2 }],
      pins(A),
      undefined,
      ["GPU-a"],
      ["GPU-a:not-allowed", "GPU-a:not-allowed"],
    ],
    ["a uuid announced twice, unpinned and unbound: still one card", [H1, { ...H1, index: 2 }], null, undefined, ["GPU-h1"], ["GPU-h1:not-allowed"]],
    [
      "a name matching two allowances spends both: never more cards of a type than its count",
      [1, 2, 3].map((i) => card(`GPU-x${i}`, i, "NVIDIA A100 RTX 3060", 4096)),
      null,
      [
        { type: "A100", count: 2 },
        { type: "RTX 3060", count: 1 },
      ],
      ["GPU-x1"],
      ["GPU-x2:not-allowed", "GPU-x3:not-allowed"],
    ],
  ])("gpu-scheduler node cards - %s", (_name, cards, pinned, allowance, usable, held) => {
    expect(standingOf(cards, pinned, allowance)).toEqual({ usable, held });
  });
});

describe("gpu-scheduler node cards - GPU_NODE_CARDS", () => {
  test.each<[string, string | undefined, Record<string, CardAllowance[]>]>([
    ["unset: no bound", undefined, {}],
    ["empty: no bound", " ", {}],
    ["one node, one type", "gpu-node.a=H100:8", { "gpu-node.a": [{ type: "H100", count: 8 }] }],
    [
      "several nodes, names with spaces, a default",
      " gpu-node.a = H100:8 , A100 : 4 ; gpu-node.b=RTX 3060:1;*=Test GPU:2;",
      {
        "gpu-node.a": [
          { type: "H100", count: 8 },
          { type: "A100", count: 4 },
        ],
        "gpu-node.b": [{ type: "RTX 3060", count: 1 }],
        "*": [{ type: "Test GPU", count: 2 }],
      },
    ],
    ["a node allowed nothing", "gpu-node.c=", { "gpu-node.c": [] }],
  ])("gpu-scheduler node cards - %s", (_name, raw, expected) => {
    expect(Object.fromEntries(parseNodeCards(raw))).toEqual(expected);
  });

  test.each([
    ["no =", "gpu-node.a"],
    ["no count", "gpu-node.a=H100"],
    ["a zero count", "gpu-node.a=H100:0"],
    ["a negative count", "gpu-node.a=H100:-1"],
    ["a huge count", "gpu-node.a=H100:100000"],
    ["a node named twice", "gpu-node.a=H100:1;gpu-node.a=A100:1"],
    ["a node id with a space", "gpu node=H100:1"],
    ["no type", "gpu-node.a=:2"],
  ])("gpu-scheduler node cards - refused: %s", (_name, raw) => {
    expect(() => parseNodeCards(raw)).toThrow(/GPU_NODE_CARDS must be/);
  });
});

/** A store as the database keeps pins: the first registration wins, acceptances add. */
class MemoryPins implements PinStore {
  readonly rows = new Map<string, PinnedCard[]>();
  reads = 0;
  async register(nodeId: string, cards: PinnedCard[]) {
    this.reads++;
    if (!this.rows.has(nodeId)) this.rows.set(nodeId, cards);
    return this.rows.get(nodeId)!;
  }
  async accept(nodeId: string, cards: PinnedCard[]) {
    const kept = (this.rows.get(nodeId) ?? []).filter((p) => !cards.some((c) => c.uuid === p.uuid));
    this.rows.set(nodeId, [...kept, ...cards]);
    return this.rows.get(nodeId)!;
  }
}
const hb = (nodeId: string, cards: GpuCard[]): NodeHeartbeat => ({ nodeId, cards, runningJobIds: [], executor: "process", at: new Date(0).toISOString() });

describe("gpu-scheduler node cards - vetting across replicas", () => {
  test("gpu-scheduler node cards - the first registration pins; new cards wait; an acceptance on one replica reaches the other at the next heartbeat", async () => {
    const store = new MemoryPins();
    const [one, two] = [new CardVetting(store, new Map()), new CardVetting(store, new Map())];
    const standing = async (v: CardVetting, beat: NodeHeartbeat) => {
      await v.refresh(beat, new Date());
      return v.standing(beat.nodeId, beat.cards).usable.map((c) => c.uuid);
    };
    expect(await standing(one, hb("n", [A]))).toEqual(["GPU-a"]);
    const reads = store.reads;
    expect(await standing(one, hb("n", [A]))).toEqual(["GPU-a"]);
    expect(store.reads).toBe(reads); // unchanged cards: no read
    expect(await standing(one, hb("n", [A, H1, H2]))).toEqual(["GPU-a"]);
    expect(await standing(two, hb("n", [A, H1, H2]))).toEqual(["GPU-a"]);
    await one.accept("n", [pinOf(H1)], "admin", new Date());
    expect(one.standing("n", [A, H1, H2]).usable.map((c) => c.uuid)).toEqual(["GPU-a", "GPU-h1"]);
    expect(await standing(two, hb("n", [A, H1, H2]))).toEqual(["GPU-a", "GPU-h1"]);
  });

  test("gpu-scheduler node cards - without a store nothing is pinned; GPU_NODE_CARDS still bounds, `*` for nodes not named", async () => {
    const v = new CardVetting(undefined, parseNodeCards("n=Test GPU:1;*=H100:1"));
    await v.refresh(hb("n", [A, card("GPU-b", 1)]), new Date());
    expect(v.standing("n", [A, card("GPU-b", 1)]).held.map((c) => c.reason)).toEqual(["not-allowed"]);
    expect(v.standing("other", [A, H1, H2]).usable.map((c) => c.uuid)).toEqual(["GPU-h1"]);
  });
});

describe("gpu-scheduler node cards - the view and the counts", () => {
  test("gpu-scheduler node cards - held cards are neither placed on nor shown to clients; accepting them is news", () => {
    const view = new ClusterView(0);
    const standing = cardStanding([A, H1], pins(A), undefined);
    expect(view.heard(hb("n", [A, H1]), 0, standing).changed).toBe(true);
    expect(view.schedulableCards().map((c) => c.uuid)).toEqual(["GPU-a"]);
    expect(view.cardNames()).toEqual(["Test GPU"]);
    expect(view.mostCardsOnOneNode("H100")).toBe(0);
    expect(view.heard(hb("n", [A, H1]), 1000, standing).changed).toBe(false);
    view.restand("n", cardStanding([A, H1], pins(A, H1), undefined));
    expect(view.schedulableCards().map((c) => c.uuid)).toEqual(["GPU-a", "GPU-h1"]);
    expect(heldCardCounts(view.nodeEntries())).toEqual({ pendingCards: { n: 0 }, disallowedCards: { n: 0 } });
    view.heard(hb("n", [A, H1, H2]), 2000, cardStanding([A, H1, H2], pins(A, H1), [{ type: "any", count: 1 }]));
    expect(heldCardCounts(view.nodeEntries())).toEqual({ pendingCards: { n: 1 }, disallowedCards: { n: 1 } });
  });
});
