/**
 * Heartbeats waiting for their database work (reconciling the jobs they list), coalesced to the
 * latest per node: a heartbeat replaces its node's waiting one in O(1), and one loop applies them
 * one at a time. However fast a node sends, it costs at most one query in flight and one waiting
 * heartbeat, and other nodes' heartbeats are never queued behind its backlog.
 */
import type { NodeHeartbeat } from "../../lib/gpu-protocol";

type Waiting = { hb: NodeHeartbeat; settle: { resolve(): void; reject(err: unknown): void } };

export class HeartbeatInbox {
  /** node id → its latest heartbeat not yet applied (Map order: first come, first applied). */
  private readonly waiting = new Map<string, Waiting>();
  private draining?: Promise<void>;
  /** Heartbeats replaced by a later one of their node before being applied. */
  superseded = 0;

  constructor(private readonly apply: (hb: NodeHeartbeat) => Promise<void>) {}

  /** Resolves once this heartbeat, or a later one of its node that replaced it, has been applied. */
  push(hb: NodeHeartbeat): Promise<void> {
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

  /** Waits until every waiting heartbeat has been applied. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    for (;;) {
      const next = this.waiting.entries().next();
      if (next.done) break;
      const [nodeId, entry] = next.value;
      this.waiting.delete(nodeId);
      await this.apply(entry.hb).then(entry.settle.resolve, entry.settle.reject);
    }
    this.draining = undefined;
  }
}
