/**
 * Finished jobs must not slow the hot path as they pile up: housekeeping moves jobs ended more than
 * GPU_JOB_ARCHIVE_AFTER_S ago (card free) from the queue table to jobs_history, removes archived
 * ones after GPU_JOB_RETENTION_DAYS (with their kept attempts, and settled webhook deliveries as
 * old), and keeps the queue table healthy
 * where autovacuum does not run (or lags): VACUUM (ANALYZE) once GPU_JOBS_VACUUM_ROWS rows died,
 * ANALYZE alone once as many changed (statistics taken while the queue was empty make the planner
 * read whole queue indexes), each at most once per GPU_JOBS_VACUUM_INTERVAL_S counting
 * autovacuum's own runs. Every step is a bounded batch; the decisions are pure functions.
 */
import type { LoggerInstance } from "moleculer";
import type { HistoryRepository, VacuumStats } from "../store/history.repository";
import type { Clock } from "./ports";

export type HistorySettings = {
  /** GPU_JOB_ARCHIVE_AFTER_S: an ended job leaves the queue table this long after it ended. */
  archiveAfterS: number;
  /** GPU_JOB_RETENTION_DAYS: an ended job (and its attempts) is removed this long after it ended. */
  retentionDays: number;
  /** GPU_JOBS_VACUUM_ROWS: dead rows that make housekeeping vacuum the queue table, changed rows that make it analyze it (0: never). */
  vacuumRows: number;
  /** GPU_JOBS_VACUUM_INTERVAL_S: at most one vacuum, and one analyze (anyone's, autovacuum's too), per this long. */
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

/** What housekeeping should do to the queue table now: vacuum (and analyze), analyze, or nothing. */
export function tableUpkeep(stats: VacuumStats, nowMs: number, s: Pick<HistorySettings, "vacuumRows" | "vacuumIntervalS">): "vacuum" | "analyze" | null {
  const due = (last: Date | null) => last === null || nowMs - last.getTime() >= s.vacuumIntervalS * 1000;
  if (s.vacuumRows <= 0) return null;
  if (stats.deadRows >= s.vacuumRows && due(stats.lastVacuumAt)) return "vacuum";
  if (stats.changedRows >= s.vacuumRows && due(stats.lastAnalyzeAt)) return "analyze";
  return null;
}

export class JobHistory {
  private running = false;

  constructor(
    private readonly repo: Pick<HistoryRepository, "archive" | "purge" | "purgeDeliveries" | "dropEmptyCounters" | "vacuumStats" | "vacuum">,
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
      await this.batches(() => this.repo.purgeDeliveries(purgeBefore, HISTORY_BATCH));
      await this.repo.dropEmptyCounters();
      const upkeep = tableUpkeep(await this.repo.vacuumStats(), now.getTime(), this.settings);
      if (upkeep) {
        const startedAt = Date.now();
        await this.repo.vacuum(upkeep === "analyze");
        this.logger.info(`${upkeep === "vacuum" ? "Vacuumed" : "Analyzed"} the jobs table in ${Date.now() - startedAt} ms`);
      }
    } finally {
      this.running = false;
    }
  }

  private async batches(step: () => Promise<number>): Promise<void> {
    for (let i = 0; i < BATCHES_PER_PASS && (await step()) === HISTORY_BATCH; i++);
  }
}
