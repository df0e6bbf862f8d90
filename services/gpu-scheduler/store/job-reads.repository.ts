/**
 * The read-only SQL of gpu_scheduler.jobs: a client's jobs (queued or archived), an account's
 * standing in the queue, the figures of usage and metrics. The writes (jobs.repository.ts)
 * extend it.
 */
import type { Pool, PoolClient } from "pg";
import type { QueueAccount } from "../core/queue-position";
import { decayedUsageSql } from "./placement.repository";
import type { StoredStatus } from "../core/transitions";
import { showsAsSql } from "../core/public-status";
import { categoriesShowingSql } from "./job-counters";
import { AccountState, AttemptRow, COLUMNS, JobRow, usageNameSql } from "./job-row";

type AccountJson = { c: string; n: number; u: number; h: number };
/** The accounts of `queueAccountsSql`'s JSON value. */
export const toAccounts = (json: AccountJson[] | null): Array<Omit<QueueAccount, "weight">> =>
  (json ?? []).map((a) => ({ clientId: a.c, queued: a.n, usage: Number(a.u), held: a.h }));

export class JobReads {
  /** `halfLifeS`: FAIR_SHARE_HALF_LIFE_S (the decay of account_usage). */
  constructor(
    protected readonly db: Pool,
    protected readonly halfLifeS = 3600,
  ) {}

  /** For the usage service: each account's started attempts holding cards now, its held GPUs and its queued jobs. */
  async accountState(clientIds: string[]): Promise<Record<string, AccountState>> {
    // Queued jobs from the exact counters (no count over the account's queue); held cards through the index of held cards by account.
    const { rows } = await this.db.query<{ client_id: string; held: number; queued: number; running: AccountState["running"] | null }>(
      `SELECT c.id AS client_id, COALESCE(h.held, 0)::int AS held, h.running,
         (SELECT COALESCE(sum(q.n), 0)::int FROM gpu_scheduler.queued_counts q WHERE q.client_id = c.id) AS queued
       FROM unnest($1::uuid[]) AS c(id)
       LEFT JOIN LATERAL (
         SELECT sum(j.gpu_count) AS held,
           jsonb_agg(jsonb_build_object('startedAt', j.started_at, 'cards', j.gpu_count, 'gpuName', ${usageNameSql("j")}))
             FILTER (WHERE ${showsAsSql("running", "j")}) AS running
         FROM gpu_scheduler.jobs j WHERE j.holding AND j.client_id = c.id) h ON true`,
      [clientIds],
    );
    return Object.fromEntries(
      rows.filter((r) => r.held > 0 || r.queued > 0).map((r) => [r.client_id, { heldGpus: r.held, queuedJobs: r.queued, running: r.running ?? [] }]),
    );
  }

  /**
   * For `queuePosition`, in one round trip: each queued job of `ids` with its account and how many
   * of that account's queued jobs come before it (priority, then age: those of its own priority
   * counted, at most the account's queued-jobs limit), and every account with queued jobs (`queueAccounts`).
   */
  async queueStanding(
    ids: string[],
    db: Pool | PoolClient = this.db,
  ): Promise<{ targets: Array<{ id: string; clientId: string; ahead: number }>; accounts: Array<Omit<QueueAccount, "weight">> }> {
    const { rows } = await db.query<{
      targets: Array<{ id: string; c: string; ahead: number }> | null;
      accounts: AccountJson[] | null;
    }>(
      `WITH targets AS (
         SELECT t.id, t.client_id AS c,
           -- Higher priorities from the counters; the same priority counted (every condition an index condition of jobs_queue_by_account_order).
           (SELECT COALESCE(sum(n), 0)::int FROM gpu_scheduler.queued_counts qc WHERE qc.client_id = t.client_id AND qc.priority > t.priority)
           + (SELECT count(*)::int FROM gpu_scheduler.jobs o WHERE o.status = 'queued' AND o.client_id = t.client_id
              AND o.priority = t.priority AND o.seq < t.seq) AS ahead
         -- By primary key, then the status (OFFSET 0 keeps them apart: stale statistics would send it through a queue index).
         FROM (SELECT id, client_id, priority, seq, status FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[]) OFFSET 0) t WHERE t.status = 'queued')
       SELECT (SELECT json_agg(targets) FROM targets) AS targets,
         CASE WHEN EXISTS (SELECT 1 FROM targets) THEN (${this.queueAccountsSql()}) END AS accounts`,
      [ids],
    );
    return {
      targets: (rows[0].targets ?? []).map((t) => ({ id: t.id, clientId: t.c, ahead: t.ahead })),
      accounts: toAccounts(rows[0].accounts),
    };
  }

  /** Every account with queued jobs: how many (queued_counts), its decayed usage and the GPUs it holds. */
  async queueAccounts(db: Pool | PoolClient = this.db): Promise<Array<Omit<QueueAccount, "weight">>> {
    const { rows } = await db.query<{ accounts: AccountJson[] | null }>(`SELECT (${this.queueAccountsSql()}) AS accounts`);
    return toAccounts(rows[0].accounts);
  }

  /** `queueAccounts` as one JSON value; each account's held cards through the index of held cards by account. */
  queueAccountsSql(): string {
    return `SELECT json_agg(json_build_object('c', q.c, 'n', q.n, 'u', COALESCE(${decayedUsageSql(this.halfLifeS)}, 0)::float8,
        'h', (SELECT COALESCE(sum(h.gpu_count), 0)::int FROM gpu_scheduler.jobs h WHERE h.holding AND h.client_id = q.c)))
      FROM (SELECT client_id AS c, sum(n)::int AS n FROM gpu_scheduler.queued_counts GROUP BY 1 HAVING sum(n) > 0) q
      LEFT JOIN gpu_scheduler.account_usage u ON u.client_id = q.c`;
  }

  /** The job, in the queue table or archived (one statement: a job being archived is seen in one of them). */
  async findForClient(id: string, clientId: string): Promise<JobRow | undefined> {
    const { rows } = await this.db.query<JobRow>(
      `SELECT ${COLUMNS} FROM gpu_scheduler.jobs WHERE id = $1 AND client_id = $2
       UNION ALL SELECT ${COLUMNS} FROM gpu_scheduler.jobs_history WHERE id = $1 AND client_id = $2 LIMIT 1`,
      [id, clientId],
    );
    return rows[0];
  }

  /** As `findForClient`, for any account. */
  async find(id: string): Promise<JobRow | undefined> {
    const { rows } = await this.db.query<JobRow>(
      `SELECT ${COLUMNS} FROM gpu_scheduler.jobs WHERE id = $1 UNION ALL SELECT ${COLUMNS} FROM gpu_scheduler.jobs_history WHERE id = $1 LIMIT 1`,
      [id],
    );
    return rows[0];
  }

  /** What following a job's output needs (log-follow.ts). */
  async followed(id: string): Promise<{ id: string; clientId: string; status: StoredStatus; attempts: number; nodeId: string | null } | undefined> {
    const { rows } = await this.db.query<{ id: string; clientId: string; status: StoredStatus; attempts: number; nodeId: string | null }>(
      `SELECT id, client_id AS "clientId", status, attempts, node_id AS "nodeId" FROM gpu_scheduler.jobs WHERE id = $1`,
      [id],
    );
    return rows[0];
  }

  /** An ended attempt of a retried job (the current or last one is the job's row). */
  async attempt(jobId: string, attempt: number): Promise<AttemptRow | undefined> {
    const { rows } = await this.db.query<AttemptRow>(
      `SELECT attempt, node_id, exit_code, output, output_base64 FROM gpu_scheduler.job_attempts WHERE job_id = $1 AND attempt = $2`,
      [jobId, attempt],
    );
    return rows[0];
  }

  /** The account's newest jobs, queued or archived, newest first (each table read through its (client_id, seq) index). */
  /** `deploymentId`: only the replicas of that model deployment (the document's field; the account's own rows are few enough to filter). */
  async listForClient(clientId: string, limit: number, deploymentId?: string): Promise<JobRow[]> {
    const only = deploymentId === undefined ? "" : "AND spec->>'deploymentId' = $3";
    const { rows } = await this.db.query<JobRow>(
      `(SELECT ${COLUMNS}, seq FROM gpu_scheduler.jobs WHERE client_id = $1 ${only} ORDER BY seq DESC LIMIT $2)
       UNION ALL (SELECT ${COLUMNS}, seq FROM gpu_scheduler.jobs_history WHERE client_id = $1 ${only} ORDER BY seq DESC LIMIT $2)
       ORDER BY seq DESC LIMIT $2`,
      deploymentId === undefined ? [clientId, limit] : [clientId, limit, deploymentId],
    );
    return rows;
  }

  /** Jobs waiting, as clients see them (placed, or taken by a node but not started yet, counts as queued); from the counters. */
  async queueDepth(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      `SELECT COALESCE(sum(n), 0)::int AS n FROM gpu_scheduler.job_counts WHERE category IN ${categoriesShowingSql("queued")}`,
    );
    return rows[0].n;
  }

  /**
   * Jobs per status, archived ones included until retention removes them; a job its node has but
   * has not started yet counts as `assigned` (clients see both as queued). From the counters.
   */
  async countByStatus(): Promise<Record<StoredStatus, number>> {
    const { rows } = await this.db.query<{ status: StoredStatus; n: number }>(
      `SELECT category AS status, sum(n)::int AS n FROM gpu_scheduler.job_counts GROUP BY 1`,
    );
    const counts = { waiting: 0, queued: 0, assigned: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
    for (const r of rows) counts[r.status] = r.n;
    return counts;
  }
}
