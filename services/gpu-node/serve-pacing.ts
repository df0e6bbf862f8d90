/**
 * The pace of a replica's answers on the bus (issue 29): every packet a stream's chunk becomes is
 * a RES packet of this node, which the receivers cap per node (lib/bus-budget.ts, NODE_BUDGETS.RES);
 * one over that budget is dropped and its stream stalls. So the node sends at most SERVE_PACKETS
 * per second over all its serve connections together, whatever the replicas write: a chunk goes at
 * once while the node has packets to spare (a non-streamed answer, a quiet stream: no delay), and
 * while it has none, what a connection's replica writes meanwhile is coalesced into its next packet
 * (at most MAX_PACKET_BYTES; the replica is read no further until it is sent). Streams then slow
 * down in bytes per packet, not in packets lost.
 */
import { Transform, type TransformCallback } from "stream";
import { TokenBuckets, type Budget } from "../../lib/bus-budget";
import { toWire } from "../../lib/deployment-protocol";

/** What the node's serve answers may use of its RES budget (half: the rest stays for its other answers). */
export const SERVE_PACKETS: Budget = { perSecond: 1000, burst: 1000 };
/** The most one packet carries (below Moleculer's maxChunkSize, 256 KiB, so it is never split). */
export const MAX_PACKET_BYTES = 64 * 1024;

/** A token bucket whose waiters are served in turn (first come, first served). */
export class PacketPacer {
  private readonly buckets = new TokenBuckets();
  private readonly queue: Array<() => void> = [];
  private timer?: NodeJS.Timeout;

  constructor(private readonly budget: Budget = SERVE_PACKETS) {}

  /** Runs `send` now when a packet is to spare, else once one is (after those waiting before it). */
  whenFree(send: () => void): void {
    this.queue.push(send);
    this.drain();
  }

  private drain(): void {
    while (this.queue.length && this.buckets.take("serve", this.budget, Date.now())) this.queue.shift()!();
    if (this.queue.length && !this.timer) {
      this.timer = setTimeout(
        () => {
          this.timer = undefined;
          this.drain();
        },
        Math.ceil(1000 / this.budget.perSecond),
      );
    }
  }
}

/** The node's pacer, shared by all its serve connections. */
export const servePacer = new PacketPacer();

/**
 * A connection's answer, coalesced into packets at the pacer's pace; `latin1`: each packet as
 * latin1-wire strings (an object-mode stream, lib/deployment-protocol.ts), else as a Buffer.
 */
export class CoalescedAnswer extends Transform {
  private pending: Buffer[] = [];
  private size = 0;
  private waiting = false;
  /** The replica's next chunk, held back while a full packet waits. */
  private held?: TransformCallback;
  private ending?: TransformCallback;

  constructor(
    private readonly pacer: PacketPacer = servePacer,
    private readonly latin1 = false,
  ) {
    super({ readableObjectMode: latin1 });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.pending.push(chunk);
    this.size += chunk.length;
    this.schedule();
    if (this.size >= MAX_PACKET_BYTES) this.held = callback;
    else callback();
  }

  override _flush(callback: TransformCallback): void {
    // The end goes right after what is left (at once when nothing is): one packet per connection,
    // and a connection the replica closed must leave the platform's pool without waiting.
    if (!this.size) return callback();
    this.ending = callback;
    this.schedule();
  }

  private schedule(): void {
    if (this.waiting) return;
    this.waiting = true;
    this.pacer.whenFree(() => this.send());
  }

  private send(): void {
    this.waiting = false;
    if (this.destroyed) return;
    if (this.size) {
      const packet = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.size);
      this.pending = [];
      this.size = 0;
      if (this.latin1) for (const chunk of toWire(packet)) this.push(chunk);
      else this.push(packet);
      const held = this.held;
      this.held = undefined;
      held?.();
    }
    const ending = this.ending;
    this.ending = undefined;
    ending?.();
  }
}
