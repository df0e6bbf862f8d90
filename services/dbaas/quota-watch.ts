/**
 * When to measure what: every active database each `fullS`; in between, every `tickS`, one read
 * of all databases' activity picks those near their quota, writing fast, building an index,
 * growing, active (a bounded sample) or written while frozen (quota-activity.ts), and only those
 * are measured.
 */
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import type { QuotaEnforcer, QuotaReport } from "./quota";
import { Counters, DatabaseActivity, dueForMeasure } from "./quota-activity";

export type ActivitySource = { activity(databaseNames: string[], minAgeS: number): Promise<Map<string, DatabaseActivity>> };

export class QuotaWatch {
  /** Each database's counters at the last tick (the baseline of the next delta); undefined before the first. */
  private counters?: Map<string, Counters>;
  /** Each database's recorded size at the last tick: a larger one now means its last measurement found it growing. */
  private sizes = new Map<string, number>();
  private lastFullMs = -Infinity;

  constructor(
    private readonly deps: {
      enforcer: QuotaEnforcer;
      repo: DatabasesRepository;
      tenant: ActivitySource;
      fullS: () => number;
      tickS: () => number;
      busyRows: () => number;
      /** Active databases given a size sample per tick (growing ones first). */
      samples: () => number;
      now?: () => number;
    },
  ) {}

  /** The periodic round: a full check when due, else the databases the activity points at. */
  async round(): Promise<QuotaReport> {
    if (this.clock() - this.lastFullMs >= this.deps.fullS() * 1000) return this.full();
    const rows = await this.deps.repo.listByStatus("active");
    const due = await this.observe(rows);
    return this.deps.enforcer.check(rows.filter((r) => due.has(r.id)));
  }

  /** Measures every active database (the activity read first, as the next tick's baseline). */
  async full(): Promise<QuotaReport> {
    this.lastFullMs = this.clock();
    const rows = await this.deps.repo.listByStatus("active");
    await this.observe(rows);
    return this.deps.enforcer.check(rows);
  }

  /** Seconds until the next round. */
  intervalS(): number {
    return Math.min(this.deps.tickS(), this.deps.fullS());
  }

  private async observe(rows: DatabaseRow[]): Promise<Set<string>> {
    const activity = await this.deps.tenant.activity(
      rows.map((r) => r.database_name),
      this.deps.tickS(),
    );
    const watched = rows.map((r) => {
      const storageBytes = Number(r.storage_bytes ?? 0);
      const grew = storageBytes > (this.sizes.get(r.id) ?? Infinity);
      const measuredAt = r.measured_at ? new Date(r.measured_at).getTime() : 0;
      return { id: r.id, databaseName: r.database_name, storageBytes, maxStorageMb: r.max_storage_mb, readOnly: r.read_only, grew, measuredAt };
    });
    const due = dueForMeasure(watched, activity, this.counters, this.deps.busyRows(), this.deps.samples());
    this.counters = new Map([...activity].map(([name, a]) => [name, { rowsWritten: a.rowsWritten, transactions: a.transactions }]));
    this.sizes = new Map(watched.map((w) => [w.id, w.storageBytes]));
    return new Set(due.keys());
  }

  private clock(): number {
    return (this.deps.now ?? Date.now)();
  }
}
