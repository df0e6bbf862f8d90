/** A warning log for events that can come in floods (the bus transporter's refused packets). */

/** One warning per kind per 10 s, with how many were suppressed in between. */
export class RateLimitedLog {
  private last = new Map<string, { at: number; suppressed: number }>();
  constructor(
    private readonly log: (message: string) => void,
    private readonly everyMs = 10_000,
  ) {}
  note(kind: string, message: string): void {
    const now = Date.now();
    const entry = this.last.get(kind);
    if (entry && now - entry.at < this.everyMs) {
      entry.suppressed++;
      return;
    }
    const more = entry?.suppressed ? ` (${entry.suppressed} more since the last warning)` : "";
    this.last.set(kind, { at: now, suppressed: 0 });
    this.log(message + more);
  }
}
