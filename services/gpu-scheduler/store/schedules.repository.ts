/**
 * SQL of `gpu_scheduler.schedules` (issue 30): an account's cron schedules of a job body, and the
 * claim of their due ticks. A tick is claimed with `FOR UPDATE SKIP LOCKED` and moved on
 * (`next_run_at`) in the transaction that inserts its job, so each tick makes one job whatever
 * number of replicas tick at once, and a replica dying mid-tick leaves the tick due for another.
 */
import type { Pool, PoolClient } from "pg";
import { transaction } from "../../../lib/db";
import type { JobRequest } from "../../../lib/job-spec";

/** What migration 18 creates (beside the jobs' preemption columns). */
export const SCHEDULES_TABLE = `
      CREATE TABLE schedules (
        id uuid PRIMARY KEY,
        client_id uuid NOT NULL,
        name text NOT NULL,
        cron text NOT NULL,
        timezone text NOT NULL,
        concurrency text NOT NULL CHECK (concurrency IN ('allow', 'forbid', 'replace')),
        -- The job body as POSTed, without env (its values are secrets: kept apart, as the jobs' env).
        job jsonb NOT NULL,
        env jsonb,
        paused boolean NOT NULL DEFAULT false,
        -- null: the expression never runs again.
        next_run_at timestamptz,
        last_run_at timestamptz,
        last_job_id uuid,
        runs integer NOT NULL DEFAULT 0,
        skipped integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE INDEX schedules_due ON schedules (next_run_at) WHERE NOT paused AND next_run_at IS NOT NULL;
      CREATE INDEX schedules_by_client ON schedules (client_id, created_at DESC);`;

export type Concurrency = "allow" | "forbid" | "replace";

export type ScheduleRow = {
  id: string;
  client_id: string;
  name: string;
  cron: string;
  timezone: string;
  concurrency: Concurrency;
  job: Omit<JobRequest, "env">;
  env: Record<string, string> | null;
  paused: boolean;
  next_run_at: Date | null;
  last_run_at: Date | null;
  last_job_id: string | null;
  runs: number;
  skipped: number;
  created_at: Date;
  updated_at: Date;
};

/** A due schedule, with whether its last job has not finished yet. */
export type DueSchedule = ScheduleRow & { last_unfinished: boolean };

/** The columns a PATCH may change. */
export type ScheduleChange = Partial<Pick<ScheduleRow, "name" | "cron" | "timezone" | "concurrency" | "job" | "env" | "paused" | "next_run_at">>;

const CHANGEABLE: ReadonlyArray<keyof ScheduleChange> = ["name", "cron", "timezone", "concurrency", "job", "env", "paused", "next_run_at"];
const JSON_COLUMNS = new Set(["job", "env"]);

export class SchedulesRepository {
  constructor(private readonly db: Pool) {}

  async insert(row: Omit<ScheduleRow, "runs" | "skipped" | "last_run_at" | "last_job_id">): Promise<ScheduleRow> {
    const { rows } = await this.db.query<ScheduleRow>(
      `INSERT INTO gpu_scheduler.schedules (id, client_id, name, cron, timezone, concurrency, job, env, paused, next_run_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *`,
      [row.id, row.client_id, row.name, row.cron, row.timezone, row.concurrency, row.job, row.env, row.paused, row.next_run_at, row.created_at, row.updated_at],
    );
    return rows[0];
  }

  async countForClient(clientId: string): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM gpu_scheduler.schedules WHERE client_id = $1`, [clientId]);
    return rows[0].n;
  }

  async findForClient(id: string, clientId: string): Promise<ScheduleRow | undefined> {
    const { rows } = await this.db.query<ScheduleRow>(`SELECT * FROM gpu_scheduler.schedules WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return rows[0];
  }

  async listForClient(clientId: string, limit: number): Promise<ScheduleRow[]> {
    const { rows } = await this.db.query<ScheduleRow>(`SELECT * FROM gpu_scheduler.schedules WHERE client_id = $1 ORDER BY created_at DESC, id LIMIT $2`, [
      clientId,
      limit,
    ]);
    return rows;
  }

  async update(id: string, clientId: string, change: ScheduleChange, now: Date): Promise<ScheduleRow | undefined> {
    const keys = CHANGEABLE.filter((k) => change[k] !== undefined);
    const sets = keys.map((k, i) => `${k} = $${i + 4}${JSON_COLUMNS.has(k) ? "::jsonb" : ""}`);
    const values = keys.map((k) => (JSON_COLUMNS.has(k) && change[k] !== null ? JSON.stringify(change[k]) : change[k]));
    const { rows } = await this.db.query<ScheduleRow>(
      `UPDATE gpu_scheduler.schedules SET ${[...sets, "updated_at = $3"].join(", ")} WHERE id = $1 AND client_id = $2 RETURNING *`,
      [id, clientId, now, ...values],
    );
    return rows[0];
  }

  async remove(id: string, clientId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(`DELETE FROM gpu_scheduler.schedules WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return (rowCount ?? 0) > 0;
  }

  /**
   * Claims up to `limit` schedules due at `now` (locked for this transaction; those another
   * transaction holds are skipped) and hands them to `work` with the transaction: what it writes
   * (the job, `advance`) commits with the claim or not at all.
   */
  async claimDue<T>(now: Date, limit: number, work: (due: DueSchedule[], tx: PoolClient) => Promise<T>): Promise<T> {
    return transaction(this.db, async (tx) => {
      const { rows } = await tx.query<DueSchedule>(
        `SELECT s.*, (j.id IS NOT NULL AND j.status NOT IN ('completed', 'failed', 'cancelled')) AS last_unfinished
         FROM gpu_scheduler.schedules s LEFT JOIN gpu_scheduler.jobs j ON j.id = s.last_job_id
         WHERE NOT s.paused AND s.next_run_at <= $1 ORDER BY s.next_run_at LIMIT $2 FOR UPDATE OF s SKIP LOCKED`,
        [now, limit],
      );
      return work(rows, tx);
    });
  }

  /**
   * The unfinished last jobs of `replace` schedules due at `now`: cancelled before their ticks are
   * claimed, since a cancel writes the job counters a claim's insert holds until it commits.
   */
  async lastJobsToReplace(now: Date, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(
      `SELECT j.id FROM gpu_scheduler.schedules s JOIN gpu_scheduler.jobs j ON j.id = s.last_job_id
       WHERE NOT s.paused AND s.next_run_at <= $1 AND s.concurrency = 'replace' AND j.status NOT IN ('completed', 'failed', 'cancelled')
       ORDER BY s.next_run_at LIMIT $2`,
      [now, limit],
    );
    return rows.map((r) => r.id);
  }

  /** Moves a claimed tick on: its next run, and the job it made (or one more skipped tick). */
  async advance(tx: PoolClient, id: string, next: Date | null, now: Date, jobId: string | null): Promise<void> {
    await tx.query(
      jobId
        ? `UPDATE gpu_scheduler.schedules SET next_run_at = $2, last_run_at = $3, last_job_id = $4, runs = runs + 1 WHERE id = $1`
        : `UPDATE gpu_scheduler.schedules SET next_run_at = $2, skipped = skipped + 1 WHERE id = $1`,
      jobId ? [id, next, now, jobId] : [id, next],
    );
  }

  /** Marks a job inserted in `tx` as made by schedule `scheduleId` (its detail's scheduleId). */
  async markJob(tx: PoolClient, jobId: string, scheduleId: string): Promise<void> {
    await tx.query(`UPDATE gpu_scheduler.jobs SET schedule_id = $2 WHERE id = $1`, [jobId, scheduleId]);
  }
}
