/**
 * Followers of growing job logs (gpu-node.follow): a follow waits until its log file grows past
 * its offset, the attempt stops running, its time is up, or it is stopped (the client left).
 * One poller per file, shared by all its followers, checks the file's size every `pollMs`:
 * a bounded cost that also sees logs written by a Docker job adopted after a restart.
 */
import { promises as fs } from "fs";

type Waiter = { fid: string; file: string; offset: number; live: () => boolean; done: () => void };

/** How long a stopped follow is remembered (a stop may overtake the page it stops). */
const STOPPED_TTL_MS = 60_000;

export class LogFollowers {
  private readonly pollers = new Map<string, { timer: NodeJS.Timeout; waiters: Set<Waiter>; polling: boolean }>();
  private readonly byFid = new Map<string, Waiter>();
  private readonly stopped = new Map<string, number>();
  /** Follow pages served (tests check a follow whose client left asks for none). */
  served = 0;

  constructor(
    private readonly pollMs = 200,
    private readonly sizeOf: (file: string) => Promise<number> = (file) =>
      fs.stat(file).then(
        (s) => s.size,
        () => 0,
      ),
  ) {}

  /** Resolves when the file grows past `offset`, `live()` turns false, `ms` passes, or `stop(fid)`. */
  wait(fid: string, file: string, offset: number, ms: number, live: () => boolean): Promise<void> {
    this.served++;
    if (this.stopped.has(fid)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter: Waiter = {
        fid,
        file,
        offset,
        live,
        done: () => {
          clearTimeout(timer);
          this.byFid.delete(fid);
          const poller = this.pollers.get(file);
          poller?.waiters.delete(waiter);
          if (poller && !poller.waiters.size) {
            clearInterval(poller.timer);
            this.pollers.delete(file);
          }
          resolve();
        },
      };
      const timer = setTimeout(waiter.done, ms);
      this.byFid.get(fid)?.done(); // one page in flight per follow
      this.byFid.set(fid, waiter);
      let poller = this.pollers.get(file);
      if (!poller) {
        const created = { timer: setInterval(() => void this.poll(file), this.pollMs), waiters: new Set<Waiter>(), polling: false };
        this.pollers.set(file, created);
        poller = created;
      }
      poller.waiters.add(waiter);
    });
  }

  /** Ends the follow's wait now and refuses its later waits (its client left). */
  stop(fid: string): boolean {
    const now = Date.now();
    for (const [old, at] of this.stopped) if (now - at > STOPPED_TTL_MS) this.stopped.delete(old);
    this.stopped.set(fid, now);
    const waiter = this.byFid.get(fid);
    waiter?.done();
    return waiter !== undefined;
  }

  /** Ends every wait (the node stops). */
  stopAll(): void {
    for (const waiter of [...this.byFid.values()]) waiter.done();
  }

  /** Follows waiting now. */
  get waiting(): number {
    return this.byFid.size;
  }

  private async poll(file: string): Promise<void> {
    const poller = this.pollers.get(file);
    if (!poller || poller.polling) return;
    poller.polling = true;
    try {
      const size = await this.sizeOf(file);
      for (const w of [...poller.waiters]) if (size > w.offset || !w.live()) w.done();
    } finally {
      poller.polling = false;
    }
  }
}
