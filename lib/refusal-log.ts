/**
 * Warnings about refused bus messages (a gpu-node heartbeat or job event that fails its check,
 * lib/gpu-protocol.ts): the first refusal of each kind from a sender is logged at once, naming
 * the sender and the field that failed; the ones after it within `windowMs` are only counted and
 * reported with the next warning. A broken node is visible, a hostile one cannot flood the log.
 */
import { LruCache } from "./lru-cache";

/** Senders remembered at once (a forgotten one is warned about again: bounded memory either way). */
const MAX_SENDERS = 1000;
const MAX_SENDER_CHARS = 200;

export class RefusalLog {
  private readonly last = new LruCache<string, { at: number; suppressed: number }>(MAX_SENDERS);

  constructor(
    private readonly warn: (line: string) => void,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** `what` refused from `sender` (a verified sender id) because `field` failed its check. */
  refused(what: string, sender: string, field: string): void {
    const key = `${what}\n${sender}`;
    const now = this.now();
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.windowMs) {
      seen.suppressed++;
      return;
    }
    const more = seen?.suppressed ? ` (${seen.suppressed} more refused since the last warning)` : "";
    this.last.set(key, { at: now, suppressed: 0 });
    this.warn(`Ignored a malformed ${what} from ${sender.slice(0, MAX_SENDER_CHARS)}: ${field} fails its check${more}`);
  }
}
