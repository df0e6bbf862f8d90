/**
 * SQL of the jobs' history (gpu_scheduler.jobs_history) and of the queue table's upkeep: ended
 * jobs moved out of the queue table, removed after retention (settled webhook deliveries too), and VACUUM where autovacuum does not
 * run. Each step is one statement over a bounded batch; replicas skip the rows another one holds.
 */
import type { Pool } from "pg";

const ENDED_SQL = `status IN ('completed', 'failed', 'cancelled') AND NOT holding`;

export type VacuumStats = { deadRows: number; changedRows: number; lastVacuumAt: Date | null; lastAnalyzeAt: Date | null };

export class HistoryRepository {
  /** The history's columns (those of jobs, by name), read once. */
  private columns?: Promise<string>;

  constructor(private readonly db: Pool) {}

  /**
   * Moves up to `limit` ended jobs whose card is free and that ended before `before` (oldest first,
   * through jobs_ended) to jobs_history; returns how many. One statement: a reader sees a job in one
   * table or the other, and the counters do not change (an archived job counts as what it ended as).
   */
  async archive(before: Date, limit: number): Promise<number> {
    const columns = await (this.columns ??= this.historyColumns());
    const { rowCount } = await this.db.query(
      `WITH moved AS (
         DELETE FROM gpu_scheduler.jobs WHERE ${ENDED_SQL} AND id IN
           (SELECT id FROM gpu_scheduler.jobs WHERE ${ENDED_SQL} AND completed_at < $1 ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING *)
       INSERT INTO gpu_scheduler.jobs_history (${columns}) SELECT ${columns} FROM moved`,
      [before, limit],
    );
    return rowCount ?? 0;
  }

  /**
   * Removes up to `limit` archived jobs that ended before `before`, with their kept attempts and
   * dependencies, and an array (with its own dependencies) once its last job goes; returns how many jobs.
   */
  async purge(before: Date, limit: number): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      `WITH gone AS (
         DELETE FROM gpu_scheduler.jobs_history WHERE id IN
           (SELECT id FROM gpu_scheduler.jobs_history WHERE completed_at < $1 ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id, array_id),
       attempts AS (DELETE FROM gpu_scheduler.job_attempts WHERE job_id IN (SELECT id FROM gone)),
       arrays AS (DELETE FROM gpu_scheduler.job_arrays a WHERE a.id IN (SELECT array_id FROM gone WHERE array_id IS NOT NULL)
         AND NOT EXISTS (SELECT 1 FROM gpu_scheduler.jobs_history h WHERE h.array_id = a.id AND h.id NOT IN (SELECT id FROM gone))
         AND NOT EXISTS (SELECT 1 FROM gpu_scheduler.jobs j WHERE j.array_id = a.id)
         RETURNING a.id),
       deps AS (DELETE FROM gpu_scheduler.job_dependencies WHERE dependant IN (SELECT id FROM gone UNION ALL SELECT id FROM arrays))
       SELECT count(*)::int AS n FROM gone`,
      [before, limit],
    );
    return rows[0].n;
  }

  /**
   * Removes up to `limit` settled webhook deliveries (delivered or failed; a pending one is still
   * owed) created before `before`, oldest first through webhook_deliveries_settled; returns how many.
   */
  async purgeDeliveries(before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.db.query(
      `DELETE FROM gpu_scheduler.webhook_deliveries WHERE id IN
         (SELECT id FROM gpu_scheduler.webhook_deliveries WHERE status <> 'pending' AND created_at < $1
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [before, limit],
    );
    return rowCount ?? 0;
  }

  /** Forgets the per-account counters of accounts with nothing queued (a concurrent submission re-creates its row). */
  async dropEmptyCounters(): Promise<number> {
    // Rows a transaction is writing are skipped (it may be one that submits again).
    const { rowCount } = await this.db.query(
      `DELETE FROM gpu_scheduler.queued_counts WHERE n = 0 AND (client_id, priority) IN
         (SELECT client_id, priority FROM gpu_scheduler.queued_counts WHERE n = 0 FOR UPDATE SKIP LOCKED)`,
    );
    return rowCount ?? 0;
  }

  /** The queue table's dead and changed rows (PostgreSQL's statistics) and when anyone last vacuumed and analyzed it. */
  async vacuumStats(): Promise<VacuumStats> {
    const { rows } = await this.db.query<{ dead: string; changed: string; vacuumed: Date | null; analyzed: Date | null }>(
      `SELECT n_dead_tup AS dead, n_mod_since_analyze AS changed, GREATEST(last_vacuum, last_autovacuum) AS vacuumed,
         GREATEST(last_analyze, last_autoanalyze) AS analyzed
       FROM pg_stat_user_tables WHERE relid = 'gpu_scheduler.jobs'::regclass`,
    );
    const r = rows[0];
    return { deadRows: Number(r?.dead ?? 0), changedRows: Number(r?.changed ?? 0), lastVacuumAt: r?.vacuumed ?? null, lastAnalyzeAt: r?.analyzed ?? null };
  }

  /** VACUUM (ANALYZE) of the queue table and its counters, or ANALYZE alone; skipped while another one holds them. */
  async vacuum(analyzeOnly = false): Promise<void> {
    await this.db.query(
      analyzeOnly
        ? `ANALYZE (SKIP_LOCKED) gpu_scheduler.jobs`
        : `VACUUM (ANALYZE, SKIP_LOCKED) gpu_scheduler.jobs, gpu_scheduler.job_counts, gpu_scheduler.queued_counts`,
    );
  }

  private async historyColumns(): Promise<string> {
    const { rows } = await this.db.query<{ name: string }>(
      `SELECT quote_ident(column_name) AS name FROM information_schema.columns
       WHERE table_schema = 'gpu_scheduler' AND table_name = 'jobs_history' ORDER BY ordinal_position`,
    );
    return rows.map((r) => r.name).join(", ");
  }
}
