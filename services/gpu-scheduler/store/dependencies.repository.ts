/**
 * SQL of job dependencies (`dependsOn`, migration 17's job_dependencies): what a dependant's
 * conditions look at now, which dependants wait on jobs that just ended, the dependencies of a new
 * job (checked against the account and locked at submission). A dependant is a job, or an array
 * submitted with `dependsOn` (its jobs wait together).
 */
import type { Pool, PoolClient } from "pg";
import type { DependencyCondition, JobDependencyParams } from "../../../lib/job-spec";
import type { ArrayOutcomes, DependencyState, JobEnd } from "../core/dependencies";

const TERMINAL = ["completed", "failed", "cancelled"];
const endOf = (status: string | null): JobEnd => (status === null ? "gone" : TERMINAL.includes(status) ? (status as JobEnd) : null);

type DepRow = {
  dependant: string;
  on_job: string | null;
  on_array: string | null;
  condition: DependencyCondition;
  status: string | null;
  total: number | null;
  completed: number | null;
  failed: number | null;
  cancelled: number | null;
};

const toState = (r: DepRow): DependencyState =>
  r.on_job !== null
    ? { condition: r.condition, jobId: r.on_job, end: endOf(r.status) }
    : { condition: r.condition, arrayId: r.on_array!, outcomes: outcomesOf(r) };

const outcomesOf = (r: Pick<DepRow, "total" | "completed" | "failed" | "cancelled">): ArrayOutcomes => ({
  total: r.total ?? 0,
  completed: r.completed ?? 0,
  failed: r.failed ?? 0,
  cancelled: r.cancelled ?? 0,
});

/** One dependency of a new job: the target's state now, or absent when it is not the account's. */
export type SubmittedDependency = DependencyState;

export class DependenciesRepository {
  constructor(private readonly db: Pool) {}

  /** Each dependant's dependencies (in `dependsOn` order) with their targets' states; dependants without any are absent. */
  async statesOf(dependants: string[]): Promise<Map<string, DependencyState[]>> {
    const { rows } = await this.db.query<DepRow>(
      `SELECT d.dependant, d.on_job, d.on_array, d.condition,
         COALESCE((SELECT j.status FROM gpu_scheduler.jobs j WHERE j.id = d.on_job),
                  (SELECT h.status FROM gpu_scheduler.jobs_history h WHERE h.id = d.on_job)) AS status,
         a.total, a.completed, a.failed, a.cancelled
       FROM gpu_scheduler.job_dependencies d LEFT JOIN gpu_scheduler.job_arrays a ON a.id = d.on_array
       WHERE d.dependant = ANY($1::uuid[]) ORDER BY d.dependant, d.ord`,
      [dependants],
    );
    const out = new Map<string, DependencyState[]>();
    for (const r of rows) out.set(r.dependant, [...(out.get(r.dependant) ?? []), toState(r)]);
    return out;
  }

  /** Dependants of these jobs, or of their arrays, that still have waiting jobs. */
  async dependantsOf(endedJobIds: string[]): Promise<string[]> {
    const { rows } = await this.db.query<{ dependant: string }>(
      `SELECT DISTINCT d.dependant FROM gpu_scheduler.job_dependencies d
       WHERE d.on_job = ANY($1::uuid[])
          OR d.on_array IN (SELECT array_id FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[]) AND array_id IS NOT NULL)`,
      [endedJobIds],
    );
    return rows.map((r) => r.dependant);
  }

  /** The waiting jobs of these dependants (a job itself, or the jobs of an array). */
  async waitingOf(dependants: string[]): Promise<Array<{ id: string; dependant: string; reason: string | null }>> {
    const { rows } = await this.db.query<{ id: string; dependant: string; reason: string | null }>(
      `SELECT id, COALESCE(CASE WHEN id = ANY($1::uuid[]) THEN id END, array_id) AS dependant, status_reason AS reason FROM gpu_scheduler.jobs
       WHERE status = 'waiting' AND (id = ANY($1::uuid[]) OR array_id = ANY($1::uuid[]))`,
      [dependants],
    );
    return rows;
  }

  /** A page of waiting jobs after `afterSeq`, in age order (the sweep): their dependant keys (the job, and its array). */
  async waitingPage(afterSeq: number, limit: number): Promise<{ keys: string[]; lastSeq: number | null }> {
    const { rows } = await this.db.query<{ id: string; array_id: string | null; seq: string }>(
      `SELECT id, array_id, seq FROM gpu_scheduler.jobs WHERE status = 'waiting' AND seq > $1 ORDER BY seq LIMIT $2`,
      [afterSeq, limit],
    );
    const keys = new Set<string>();
    for (const r of rows) keys.add(r.array_id ?? r.id).add(r.id);
    return { keys: [...keys], lastSeq: rows.length < limit ? null : Number(rows[rows.length - 1].seq) };
  }

  /**
   * The states of a new job's dependencies, in `tx` (the submission's transaction), each target
   * locked (FOR SHARE) so it cannot end unseen before the dependant is committed; null when one is
   * not the account's (or does not exist).
   */
  async forSubmission(tx: PoolClient, clientId: string, deps: readonly JobDependencyParams[]): Promise<SubmittedDependency[] | null> {
    const jobIds = deps.flatMap((d) => (d.jobId ? [d.jobId] : []));
    const arrayIds = deps.flatMap((d) => (d.arrayId ? [d.arrayId] : []));
    const found = new Map<string, string>();
    if (jobIds.length) {
      const live = await tx.query<{ id: string; status: string }>(
        `SELECT id, status FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[]) AND client_id = $2 ORDER BY id FOR SHARE`,
        [jobIds, clientId],
      );
      const archived = await tx.query<{ id: string; status: string }>(
        `SELECT id, status FROM gpu_scheduler.jobs_history WHERE id = ANY($1::uuid[]) AND client_id = $2`,
        [jobIds, clientId],
      );
      for (const r of [...archived.rows, ...live.rows]) found.set(r.id, r.status);
    }
    const arrays = new Map<string, ArrayOutcomes>();
    if (arrayIds.length) {
      const { rows } = await tx.query<DepRow & { id: string }>(
        `SELECT id, total, completed, failed, cancelled FROM gpu_scheduler.job_arrays WHERE id = ANY($1::uuid[]) AND client_id = $2 ORDER BY id FOR SHARE`,
        [arrayIds, clientId],
      );
      for (const r of rows) arrays.set(r.id, outcomesOf(r));
    }
    const states: DependencyState[] = [];
    for (const d of deps) {
      if (d.jobId) {
        if (!found.has(d.jobId)) return null;
        states.push({ condition: d.condition, jobId: d.jobId, end: endOf(found.get(d.jobId)!) });
      } else {
        const outcomes = arrays.get(d.arrayId!);
        if (!outcomes) return null;
        states.push({ condition: d.condition, arrayId: d.arrayId!, outcomes });
      }
    }
    return states;
  }

  /** Records the dependencies of `dependant` (a job, or an array), in `tx`. */
  async insert(tx: PoolClient, dependant: string, deps: readonly JobDependencyParams[]): Promise<void> {
    if (!deps.length) return;
    await tx.query(
      `INSERT INTO gpu_scheduler.job_dependencies (dependant, ord, on_job, on_array, condition)
       SELECT $1, ord - 1, j, a, c FROM unnest($2::uuid[], $3::uuid[], $4::text[]) WITH ORDINALITY AS u(j, a, c, ord)`,
      [dependant, deps.map((d) => d.jobId ?? null), deps.map((d) => d.arrayId ?? null), deps.map((d) => d.condition)],
    );
  }
}
