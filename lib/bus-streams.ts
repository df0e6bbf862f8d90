/**
 * The request and answer streams this process receives over NATS (lib/nats-transporter.ts), checked
 * before and after Moleculer's transit handles their packets:
 * - a packet is admitted by its stream's sequence (lib/stream-sequences.ts): a gap fails the stream
 *   at once, and the rest of a request stream no handler reads any more is dropped;
 * - a request stream Moleculer just opened is listened to for errors. Moleculer destroys it with an
 *   error when its sender's node leaves, and an error no one hears crashes the process; a handler
 *   listens to its own, but one that never reached a handler (an action not run here, a middleware
 *   that threw) had none. One for an action not run here is forgotten at once (its later packets
 *   are then dropped unread).
 */
import type { Readable } from "stream";
import { type StreamPayload, StreamSequences, type Verdict } from "./stream-sequences";

/** The parts of Moleculer's transit the checks read. */
export type StreamTransit = {
  pendingRequests: Map<unknown, unknown>;
  pendingReqStreams: Map<unknown, unknown>;
};

export class BusStreams {
  private readonly sequences = new StreamSequences();

  /** A REQ or RES packet of a stream, before Moleculer sees it: see StreamSequences.check. */
  admit(cmd: "REQ" | "RES", payload: StreamPayload, transit: StreamTransit | undefined): Verdict {
    const pending = cmd === "RES" ? transit?.pendingRequests : transit?.pendingReqStreams;
    return this.sequences.check(cmd, payload, (id) => Boolean(pending?.has(id)));
  }

  /** After Moleculer handled a REQ packet: the stream it opened, if it was a stream's first, is guarded. `local`: whether this process runs the action. */
  handled(payload: StreamPayload & { action?: unknown }, transit: StreamTransit | undefined, local: (action: string) => boolean): void {
    if (payload.stream !== true || payload.seq !== 0) return;
    const opened = transit?.pendingReqStreams.get(payload.id) as { stream?: Readable } | undefined;
    if (!opened?.stream) return;
    opened.stream.on("error", ignore);
    if (local(String(payload.action))) return;
    transit!.pendingReqStreams.delete(payload.id);
    opened.stream.destroy();
  }
}

function ignore(): void {}
