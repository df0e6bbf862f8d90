/**
 * Streams on the bus fail at once when a chunk is missing (issue 29). Moleculer numbers each
 * stream's packets (`seq`: 0 opens it, `stream: false` ends it) and holds one that comes early in a
 * pool, unbounded, until the missing one arrives: a packet the receiver dropped (a sender over its
 * budget, lib/bus-budget.ts) or NATS lost then stalls the stream until the call's timeout. Over
 * NATS one sender's packets on one subject arrive in order, so a gap is a loss: the packet that
 * shows it becomes the stream's end with an error (the caller's stream fails with a clear
 * message), and later packets of that stream are dropped. Moleculer also forgets a request stream
 * whose handler rejected (its error handler removes the pending request): a later packet of it
 * then opened a new stream no handler reads, pooled forever, which Moleculer destroys with an error
 * no one listens to when the caller's node leaves, and the process crashed ('Request stream closed
 * by …'). Such packets are dropped. Pure; lib/bus-streams.ts applies it for the transporter
 * before Moleculer sees a packet.
 */
import { LruCache } from "./lru-cache";

/** The fields of a REQ or RES payload a stream's packets use (Moleculer's transit). */
export type StreamPayload = {
  id?: unknown;
  seq?: unknown;
  stream?: unknown;
  sender?: unknown;
  success?: boolean;
  error?: unknown;
  data?: unknown;
  params?: unknown;
  meta?: Record<string, unknown> | null;
};

/** Streams followed at once (each ends or fails; a forgotten one only loses its gap check). */
const MAX_STREAMS = 100_000;
const FAILED = -1;

export type Verdict = "ok" | "drop" | "gap";

export class StreamSequences {
  /** Per stream (`<cmd> <id>`): the seq expected next, or FAILED once a packet was missing. */
  private readonly next = new LruCache<string, number>(MAX_STREAMS);

  /**
   * One REQ or RES packet, in arrival order. "ok": Moleculer handles it as it is; "drop": a
   * packet of a stream that failed (or a request stream whose opening packet never came); "gap":
   * packets before it are missing, and `payload` was rewritten in place to end the stream with an
   * error. `awaited(id)`: RES, whether this process waits for the answer `id`; REQ, whether a
   * handler here still reads the request stream `id` (asked for packets after the opening one).
   */
  check(cmd: "REQ" | "RES", payload: StreamPayload, awaited: (id: unknown) => boolean): Verdict {
    const seq = payload.seq;
    if (typeof seq !== "number" || !Number.isInteger(seq) || seq < 0) return "ok";
    const key = `${cmd} ${String(payload.id)}`;
    const expected = this.next.get(key);
    if (expected === FAILED) {
      if (!payload.stream) this.next.delete(key);
      return "drop";
    }
    if (expected === undefined && seq === 0) {
      if (payload.stream) this.next.set(key, 1);
      return "ok";
    }
    if (expected === undefined) {
      // Its opening packet is missing: a request stream no handler would ever read; an answer awaited fails.
      if (cmd === "RES" && !awaited(payload.id)) return "ok";
      this.next.set(key, FAILED);
      if (cmd === "REQ") return "drop";
      lost(cmd, payload, 0, seq);
      return "gap";
    }
    if (seq < expected) return "drop"; // a repeat: never from NATS, but never read twice
    if (cmd === "REQ" && !awaited(payload.id)) {
      // Its handler rejected (or the stream was closed here): nothing reads the rest.
      if (payload.stream) this.next.set(key, FAILED);
      else this.next.delete(key);
      return "drop";
    }
    if (seq === expected) {
      if (payload.stream) this.next.set(key, expected + 1);
      else this.next.delete(key);
      return "ok";
    }
    this.next.set(key, FAILED);
    lost(cmd, payload, expected, seq);
    return "gap";
  }

  /** Streams followed now (tests). */
  get size(): number {
    return this.next.size;
  }
}

/** Rewrites `payload` into its stream's end, at the seq expected, carrying the error. */
function lost(cmd: "REQ" | "RES", payload: StreamPayload, expected: number, seq: number): void {
  const error = {
    name: "MoleculerError",
    message: `A stream from ${String(payload.sender)} lost packets: #${expected} to #${seq - 1} never arrived`,
    code: 502,
    type: "STREAM_PACKETS_LOST",
    data: { expected, received: seq },
    retryable: false,
  };
  payload.seq = expected;
  payload.stream = false;
  if (cmd === "RES") {
    payload.success = false;
    payload.error = error;
    payload.data = null;
  } else {
    payload.params = null;
    payload.meta = { $streamError: error };
  }
}
