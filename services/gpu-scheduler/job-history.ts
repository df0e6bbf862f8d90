/**
 * Finished jobs must not slow the hot path as they pile up: housekeeping moves jobs ended more than
 * GPU_JOB_ARCHIVE_AFTER_S ago (card free) from the queue table to jobs_history, removes archived
 * ones after GPU_JOB_RETENTION_DAYS (with their kept attempts), and VACUUMs the queue table when
 * many rows died and nobody vacuumed it for GPU_JOBS_VACUUM_INTERVAL_S (where autovacuum runs and
 * keeps up, it never has to). Every step is a bounded batch; the decisions are pure functions.
 */
import type { LoggerInstance } from "moleculer";
import type { HistoryRepository, VacuumStats } from "./history.repository";
import type { Clock } from "./ports";

export type HistorySettings = {
  /** GPU_JOB_ARCHIVE_AFTER_S: an ended job leaves the queue table this long after it ended. */
  archiveAfterS: number;
  /** GPU_JOB_RETENTION_DAYS: an ended job (and its attempts) is removed this long after it ended. */
  retentionDays: number;
  /** GPU_JOBS_VACUUM_DEAD_ROWS: dead rows in the queue table that make housekeeping vacuum it (0: never). */
  vacuumDeadRows: number;
  /** GPU_JOBS_VACUUM_INTERVAL_S: at most one vacuum (anyone's, autovacuum's too) per this long. */
  vacuumIntervalS: number;
};

/** Jobs archived or removed per batch; a pass takes at most BATCHES_PER_PASS full batches of each. */
export const HISTORY_BATCH = 1000;
const BATCHES_PER_PASS = 5;

/** Before when a job must have ended to be archived (never after it is due for removal) and to be removed. */
export function historyCutoffs(now: Date, s: Pick<HistorySettings, "archiveAfterS" | "retentionDays">): { archiveBefore: Date; purgeBefore: Date } {
  const retentionMs = s.retentionDays * 86_400_000;
  return { archiveBefore: new Date(now.getTime() - Math.min(s.archiveAfterS * 1000, retentionMs)), purgeBefore: new Date(now.getTime() - retentionMs) };
}

/** Whether housekeeping should vacuum the queue table now. */
export function shouldVacuum(stats: VacuumStats, nowMs: number, s: Pick<HistorySettings, "vacuumDeadRows" | "vacuumIntervalS">): boolean {
  if (s.vacuumDeadRows <= 0 || stats.deadRows < s.vacuumDeadRows) return false;
  return stats.lastVacuumAt === null || nowMs - stats.lastVacuumAt.getTime() >= s.vacuumIntervalS * 1000;
}

export class JobHistory {
  private running = false;

  constructor(
    private readonly repo: Pick<HistoryRepository, "archive" | "purge" | "dropEmptyCounters" | "vacuumStats" | "vacuum">,
    private readonly settings: HistorySettings,
    private readonly clock: Clock,
    private readonly logger: Pick<LoggerInstance, "info">,
  ) {}

  /** One pass; a call while one runs does nothing (a vacuum may outlast a tick). */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const now = this.clock.now();
      const { archiveBefore, purgeBefore } = historyCutoffs(now, this.settings);
      await this.batches(() => this.repo.archive(archiveBefore, HISTORY_BATCH));
      await this.batches(() => this.repo.purge(purgeBefore, HISTORY_BATCH));
      await this.repo.dropEmptyCounters();
      if (shouldVacuum(await this.repo.vacuumStats(), now.getTime(), this.settings)) {
        const startedAt = Date.now();
        await this.repo.vacuum();
        this.logger.info(`Vacuumed the jobs table in ${Date.now() - startedAt} ms`);
      }
    } finally {
      this.running = false;
    }
  }

  private async batches(step: () => Promise<number>): Promise<void> {
    for (let i = 0; i < BATCHES_PER_PASS && (await step()) === HISTORY_BATCH; i++);
  }
}
