/**
 * Heartbeats waiting for their database work (reconciling the jobs they list), coalesced to the
 * latest per node: a heartbeat replaces its node's waiting one in O(1), and one loop applies them
 * one at a time, a node's at most once per `minIntervalMs`. However fast a node sends, it costs at
 * most one query in flight and one waiting heartbeat, and other nodes' heartbeats are never queued
 * behind its backlog.
 */
import type { NodeHeartbeat } from "../../../lib/gpu-protocol";
import { LruCache } from "../../../lib/lru-cache";

/** Nodes whose last apply time is remembered (a forgotten one may be applied early once). */
const MAX_NODES = 10_000;

type Waiting = { hb: NodeHeartbeat; settle: { resolve(): void; reject(err: unknown): void } };

export class HeartbeatInbox {
  /** node id → its latest heartbeat not yet applied (Map order: first come, first applied). */
  private readonly waiting = new Map<string, Waiting>();
  private draining?: Promise<void>;
  private readonly appliedAt = new LruCache<string, number>(MAX_NODES);
  /** Heartbeats replaced by a later one of their node before being applied. */
  superseded = 0;

  constructor(
    private readonly apply: (hb: NodeHeartbeat) => Promise<void>,
    private readonly minIntervalMs = 0,
    private readonly now: () => number = Date.now,
  ) {}

  private closed = false;

  /** Resolves once this heartbeat, or a later one of its node that replaced it, has been applied (at once after `close`). */
  push(hb: NodeHeartbeat): Promise<void> {
    if (this.closed) return Promise.resolve();
    const before = this.waiting.get(hb.nodeId);
    return new Promise<void>((resolve, reject) => {
      if (before) {
        // Its work is done by the later heartbeat; its node keeps its place in the line.
        this.superseded++;
        before.hb = hb;
        before.settle.resolve();
        before.settle = { resolve, reject };
      } else this.waiting.set(hb.nodeId, { hb, settle: { resolve, reject } });
      this.draining ??= this.drain();
    });
  }

  /** No more applies after the one under way (stopping): waiting heartbeats are let go; the next ones repeat them. */
  close(): void {
    this.closed = true;
    for (const entry of this.waiting.values()) entry.settle.resolve();
    this.waiting.clear();
  }

  /** Waits until every waiting heartbeat has been applied. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    while (this.waiting.size) {
      const now = this.now();
      let due: [string, Waiting] | undefined;
      let wakeAt = Infinity;
      for (const entry of this.waiting) {
        const at = (this.appliedAt.get(entry[0]) ?? -Infinity) + this.minIntervalMs;
        if (at <= now) {
          due = entry;
          break;
        }
        wakeAt = Math.min(wakeAt, at);
      }
      if (!due) {
        await new Promise((resolve) => setTimeout(resolve, wakeAt - now).unref());
        continue;
      }
      const [nodeId, entry] = due;
      this.waiting.delete(nodeId);
      this.appliedAt.set(nodeId, now);
      await this.apply(entry.hb).then(entry.settle.resolve, entry.settle.reject);
    }
    this.draining = undefined;
  }
}
