/**
 * The cluster as this replica knows it, from gpu-node heartbeats: nodes, their cards with live
 * telemetry, and when each was last heard. Every replica receives every heartbeat and keeps its
 * own view (the cards each node may use come from node-cards.ts); the time is passed in, never read.
 */
import { createHmac } from "crypto";
import type { GpuCard, NodeHeartbeat } from "../../../lib/gpu-protocol";
import { matchesGpuType } from "./gpu-type";
import type { CardStanding, HeldCard } from "./node-cards";

/**
 * What clients see instead of a node's id (which names its host): `node-` and 8 hex digits of an
 * HMAC keyed by a per-install secret, stable for a node and the same on every replica.
 */
export function nodeLabel(nodeId: string, secret: string): string {
  return `node-${createHmac("sha256", secret).update(nodeId).digest("hex").slice(0, 8)}`;
}

export type NodeEntry = {
  nodeId: string;
  /** The cards that take jobs: accepted and within GPU_NODE_CARDS (node-cards.ts). */
  cards: GpuCard[];
  /** Announced cards held back: pending an administrator's acceptance, or beyond GPU_NODE_CARDS. */
  held: HeldCard[];
  /** Every card of its last heartbeat. */
  announced: GpuCard[];
  runningJobIds: Set<string>;
  lastSeenMs: number;
  /** A call to this node failed: no placements on it until it is heard from again. */
  suspended: boolean;
};

export type ViewCard = GpuCard & { nodeId: string };

/** The usable and held cards of a node, in an order-free form (uuids, and each held card's reason). */
function standingKey(node: Pick<NodeEntry, "cards" | "held">): string {
  const usable = node.cards.map((c) => c.uuid).sort();
  const held = node.held.map((c) => `${c.uuid}:${c.reason}`).sort();
  return `${usable.join(",")}|${held.join(",")}`;
}

export class ClusterView {
  private readonly nodes = new Map<string, NodeEntry>();
  /** schedulableCards(), until a node comes, goes, is suspended or changes its cards. */
  private schedulable?: ViewCard[];

  constructor(
    /** When this replica started watching: a node holding jobs but never heard is lost after the timeout. */
    readonly sinceMs: number,
  ) {}

  /**
   * Records a heartbeat; says whether the node (or its set of usable cards) is new to this view.
   * `standing`: which of its cards take jobs (absent: all of them).
   */
  heard(hb: NodeHeartbeat, nowMs: number, standing: CardStanding = { usable: hb.cards, held: [] }): { changed: boolean } {
    const prev = this.nodes.get(hb.nodeId);
    const changed = !prev || prev.suspended || standingKey(prev) !== standingKey({ cards: standing.usable, held: standing.held });
    if (changed) this.schedulable = undefined;
    this.nodes.set(hb.nodeId, {
      nodeId: hb.nodeId,
      cards: standing.usable,
      held: standing.held,
      announced: hb.cards,
      runningJobIds: new Set(hb.runningJobIds),
      lastSeenMs: nowMs,
      suspended: false,
    });
    return { changed };
  }

  /** A node's cards changed standing (an administrator accepted some): placements see it at once. */
  restand(nodeId: string, standing: CardStanding): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    node.cards = standing.usable;
    node.held = standing.held;
    this.schedulable = undefined;
  }

  suspend(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (node) node.suspended = true;
    this.schedulable = undefined;
  }

  remove(nodeId: string): void {
    this.nodes.delete(nodeId);
    this.schedulable = undefined;
  }

  has(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  node(nodeId: string): NodeEntry | undefined {
    return this.nodes.get(nodeId);
  }

  /** Every node heard (and not declared lost since). */
  nodeEntries(): NodeEntry[] {
    return [...this.nodes.values()];
  }

  /** Nodes silent for longer than `timeoutMs`. */
  silent(nowMs: number, timeoutMs: number): string[] {
    return [...this.nodes.values()].filter((n) => nowMs - n.lastSeenMs > timeoutMs).map((n) => n.nodeId);
  }

  /**
   * Nodes the database says hold cards that this view has not heard from since it started watching
   * longer ago than the timeout: they are gone.
   */
  unheard(holdingNodeIds: string[], nowMs: number, timeoutMs: number): string[] {
    if (nowMs - this.sinceMs <= timeoutMs) return [];
    return holdingNodeIds.filter((id) => !this.nodes.has(id));
  }

  /** Every usable card of every node, in a stable order (held-back cards: neither shown to clients nor placed on). */
  cards(): ViewCard[] {
    const out: ViewCard[] = [];
    for (const node of [...this.nodes.values()].sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0)))
      for (const card of [...node.cards].sort((a, b) => a.index - b.index)) out.push({ ...card, nodeId: node.nodeId });
    return out;
  }

  /** Cards placements may go to (their node is not suspended); rebuilt only when nodes change. */
  schedulableCards(): ViewCard[] {
    this.schedulable ??= this.cards().filter((c) => !this.nodes.get(c.nodeId)!.suspended);
    return this.schedulable;
  }

  /** The most cards of one name matching `gpuType` on one node: the largest gpuCount the cluster can hold now. */
  mostCardsOnOneNode(gpuType: string | null): number {
    const sets = new Map<string, number>();
    for (const card of this.cards())
      if (matchesGpuType(card.name, gpuType)) sets.set(`${card.nodeId}\u0000${card.name}`, (sets.get(`${card.nodeId}\u0000${card.name}`) ?? 0) + 1);
    return Math.max(0, ...sets.values());
  }

  /** Distinct card names, for validating a requested gpuType. */
  cardNames(): string[] {
    return [...new Set(this.cards().map((c) => c.name))].sort();
  }
}
