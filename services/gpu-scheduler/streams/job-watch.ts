/**
 * GET /api/gpu/jobs/:id/events (server-sent events) as a live paged body (lib/paged-body.ts):
 * each page call waits, bounded by the keep-alive interval, for the job's next status change
 * (woken by the `job.statusChanged` broadcast, status-events.ts) and answers one `status` event,
 * or a keep-alive comment when nothing changed. The state is re-read from PostgreSQL on every
 * wake, so any scheduler replica serves any page, and a missed broadcast only delays an event.
 */
import type { BodyPage } from "../../../lib/paged-body";
import type { JobDetail } from "../contract";
import { isTerminal } from "../core/transitions";

/** Waiters for a job's next status change, woken by `notify` (per process). */
export class StatusWatch {
  private readonly waiters = new Map<string, Set<(changed: boolean) => void>>();

  /** Resolves true on the job's next change, false after `ms`; `cancel` drops it early. */
  wait(jobId: string, ms: number): { changed: Promise<boolean>; cancel(): void } {
    let settle: (changed: boolean) => void = () => undefined;
    const changed = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => settle(false), ms);
      settle = (value) => {
        clearTimeout(timer);
        const set = this.waiters.get(jobId);
        set?.delete(settle);
        if (set && !set.size) this.waiters.delete(jobId);
        resolve(value);
      };
    });
    const set = this.waiters.get(jobId) ?? new Set();
    set.add(settle);
    this.waiters.set(jobId, set);
    return { changed, cancel: () => settle(false) };
  }

  notify(jobId: string): void {
    for (const settle of [...(this.waiters.get(jobId) ?? [])]) settle(true);
  }

  /** Waiters now (the bench reports it; tests check nothing is left behind). */
  get size(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }
}

/** The params of `gpu-scheduler.eventsPage`: `last` is the key of the last event sent. */
export type EventsCursor = { id: string; last: string };

/** What makes an event: the public status, and each run of a retried job is a new `running`. */
export const eventKey = (job: Pick<JobDetail, "status" | "attempts">): string => (job.status === "running" ? `running:${job.attempts}` : job.status);

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

/** One `status` event with the job's detail; the stream ends after a terminal one. */
export function statusEventPage(job: JobDetail): BodyPage {
  const data = b64(`event: status\ndata: ${JSON.stringify(job)}\n\n`);
  return { data, next: isTerminal(job.status) ? null : { id: job.id, last: eventKey(job) } };
}

/** A comment line that keeps proxies and clients from closing an idle stream. */
export const keepAlivePage = (cursor: EventsCursor): BodyPage => ({ data: b64(": keep-alive\n\n"), next: { ...cursor } });

/** Nothing to send yet: the gateway asks again at once. */
export const emptyPage = (cursor: Record<string, unknown>): BodyPage => ({ data: "", next: { ...cursor } });

/**
 * The next page of an events stream: an event when the job's key differs from the last sent, else
 * wait (subscribed before reading, so no change is missed) and read again.
 */
export async function nextEventsPage(cursor: EventsCursor, read: () => Promise<JobDetail>, watch: StatusWatch, keepAliveMs: number): Promise<BodyPage> {
  const waiting = watch.wait(cursor.id, keepAliveMs);
  try {
    const job = await read();
    if (eventKey(job) !== cursor.last) return statusEventPage(job);
    if (!(await waiting.changed)) return keepAlivePage(cursor);
    const after = await read();
    return eventKey(after) !== cursor.last ? statusEventPage(after) : emptyPage(cursor);
  } finally {
    waiting.cancel();
  }
}
