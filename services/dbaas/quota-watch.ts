/**
 * When to measure what: every active database each `fullS`; in between, every `tickS`, one read
 * of all databases' activity picks those near their quota, writing fast, or written while frozen
 * (quota-activity.ts), and only those are measured.
 */
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import type { QuotaEnforcer, QuotaReport } from "./quota";
import { DatabaseActivity, dueForMeasure } from "./quota-activity";

export type ActivitySource = { activity(databaseNames: string[], minAgeS: number): Promise<Map<string, DatabaseActivity>> };

export class QuotaWatch {
  /** Each database's rows written at the last tick (the baseline of the next delta); undefined before the first. */
  private rowsWritten?: Map<string, number>;
  private lastFullMs = -Infinity;

  constructor(
    private readonly deps: {
      enforcer: QuotaEnforcer;
      repo: DatabasesRepository;
      tenant: ActivitySource;
      fullS: () => number;
      tickS: () => number;
      busyRows: () => number;
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
    const watched = rows.map((r) => ({
      id: r.id,
      databaseName: r.database_name,
      storageBytes: Number(r.storage_bytes ?? 0),
      maxStorageMb: r.max_storage_mb,
      readOnly: r.read_only,
    }));
    const due = dueForMeasure(watched, activity, this.rowsWritten, this.deps.busyRows());
    this.rowsWritten = new Map([...activity].map(([name, a]) => [name, a.rowsWritten]));
    return new Set(due.keys());
  }

  private clock(): number {
    return (this.deps.now ?? Date.now)();
  }
}
