/** The writes of gpu_scheduler.jobs (inserts, compare-and-set) and the scheduler's reads of its state; the read-only queries are JobReads. */
import type { Pool, PoolClient } from "pg";
import { ConnectionStatement } from "../../../lib/db";
import { admit, aheadInAccount, QueuedByPriority, Refusal } from "../core/admission";
import { normalizeGpuType, requestedGpuType } from "../core/gpu-type";
import { priorityIndex } from "../../../lib/job-spec";
import { INDEX_READS, readHolding } from "./placement.repository";
import type { JobPatch, JobState, StoredStatus } from "../core/transitions";
import { JobStatusChanged, SeenState, statusChanges, WrittenJob } from "../loop/status-events";
import { patchStatementSql, TERMINAL_SQL } from "./patch-statement";
import { JobReads } from "./job-reads.repository";
import { JobRow, NewJob, STATE_COLUMNS, toState } from "./job-row";

/** The columns an insert's source `u` gives, per job. */
export const INSERT_SOURCE = "id, client_id, spec, gpu_type, gpu_match, env, priority";

/** A job's variables as stored (none: null). */
export const envJson = (job: NewJob): string | null => (job.env && Object.keys(job.env).length ? JSON.stringify(job.env) : null);

/** Columns an insert may set beyond the usual ones (arrays, dependencies): column → SQL over the source `u`. */
export type InsertExtras = { status?: string; columns?: Record<string, string> };

/**
 * The insert of queued jobs from `source` (rows `u` of INSERT_SOURCE, optionally filtered by its own
 * WHERE) at `now` (SQL): the document, and the columns queries and indexes read, derived from it.
 * `extra`: another status (SQL) and more columns, for jobs of an array or with dependencies.
 */
export function insertJobsSql(source: string, now: string, extra: InsertExtras = {}): string {
  const more = Object.entries(extra.columns ?? {});
  const columns = more.map(([c]) => `, ${c}`).join("");
  const values = more.map(([, v]) => `, ${v}`).join("");
  return `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_type, gpu_match, status, created_at, timeout_seconds, env, env_names,
           queue_timeout_seconds, queue_deadline, priority, max_retries, gpu_count, webhook_url, preemptible, command, container_image${columns})
         SELECT u.id, u.client_id, jsonb_strip_nulls(u.spec), u.gpu_type, u.gpu_match, ${extra.status ?? "'queued'"}, ${now}, (u.spec->>'timeoutSeconds')::int, u.env,
           ARRAY(SELECT k FROM jsonb_object_keys(COALESCE(u.env, '{}')) AS k ORDER BY k COLLATE "C"),
           (u.spec->>'queueTimeoutSeconds')::int, ${now} + make_interval(secs => (u.spec->>'queueTimeoutSeconds')::int),
           u.priority, COALESCE((u.spec->>'maxRetries')::int, 0),
           COALESCE((u.spec->>'gpuCount')::int, 1), u.spec->>'webhookUrl', COALESCE((u.spec->>'preemptible')::boolean, false),
           -- For one release, for replicas of the previous version (migration 15).
           u.spec->>'command', u.spec->>'containerImage'${values}
         FROM ${source}`;
}

/** A compare-and-set's parameters as text: the patches with what each decision saw ($1), their ids ($2). */
export function compareAndSetValues(updates: Parameters<JobsRepository["compareAndSet"]>[0]): [string, string] {
  const patches = updates.map((u) => ({
    id: u.id,
    seen_status: u.seen.status,
    seen_holding: u.seen.holding,
    seen_node: u.seen.nodeId,
    seen_gpu: u.seen.gpuUuid,
    seen_preempting: Boolean(u.seen.preempting),
    patch: u.patch,
  }));
  return [JSON.stringify(patches), `{${updates.map((u) => u.id).join(",")}}`];
}

export class JobsRepository extends JobReads {
  /** Told of jobs that just ended with dependants (of them or of their array) waiting: set by the app (dependency-resolver.ts). */
  dependantsDue: (endedJobIds: string[]) => void = () => undefined;

  /** The compare-and-set, prepared on each connection (lib/db.ts). */
  readonly compareAndSetStatement: ConnectionStatement;

  /** `halfLifeS`: FAIR_SHARE_HALF_LIFE_S (the decay of account_usage). */
  constructor(
    db: Pool,
    halfLifeS = 3600,
    /** Told of the public status changes each compare-and-set committed (status-events.ts). */
    private readonly onStatusChanged: (changes: JobStatusChanged[]) => void = () => undefined,
  ) {
    super(db, halfLifeS);
    // Planned once per connection, in a transaction with the index-only settings of the placement's
    // reads (parse and plan were 1.8 of its 2.9 ms per call, for a statement that runs about twice per job).
    this.compareAndSetStatement = new ConnectionStatement(
      ["jsonb", "uuid[]"],
      patchStatementSql(
        {
          ids: `SELECT (x->>'id')::uuid FROM jsonb_array_elements($1::jsonb) x`,
          source: `jsonb_to_recordset($1::jsonb) AS p(id uuid, seen_status text, seen_holding boolean, seen_node text, seen_gpu text, seen_preempting boolean, patch jsonb)`,
          // The ids again as an array: the jobs are found through the primary key (a join alone may be planned as a scan of the table).
          // A preemption asked since the decision's state was read (or remembered) is decided again.
          match: `j.id = ANY($2::uuid[]) AND j.id = p.id AND j.status = p.seen_status AND j.holding = p.seen_holding
            AND j.node_id IS NOT DISTINCT FROM p.seen_node AND j.gpu_uuid IS NOT DISTINCT FROM p.seen_gpu AND j.preempting = p.seen_preempting`,
        },
        halfLifeS,
      ),
    );
  }

  /** Inserts queued jobs (with their queue order `seq`). `db`: a transaction's client. */
  async insert(jobs: NewJob[], now: Date, db: Pool | PoolClient = this.db): Promise<Array<{ id: string; seq: number }>> {
    const { rows } = await db.query<{ id: string; seq: string }>(
      `${insertJobsSql(`unnest($1::uuid[], $2::uuid[], $3::jsonb[], $4::text[], $6::text[], $7::jsonb[], $8::smallint[]) AS u(${INSERT_SOURCE})`, "$5::timestamptz")}
         RETURNING id, seq`,
      [
        jobs.map((j) => j.id),
        jobs.map((j) => j.clientId),
        jobs.map((j) => JSON.stringify(j.spec)),
        jobs.map((j) => requestedGpuType(j.spec.gpuType)),
        now,
        jobs.map((j) => normalizeGpuType(requestedGpuType(j.spec.gpuType))),
        jobs.map((j) => envJson(j)),
        jobs.map((j) => priorityIndex(j.spec.priority)),
      ],
    );
    return rows.map((r) => ({ id: r.id, seq: Number(r.seq) }));
  }

  /**
   * Inserts those of `jobs` that fit their account's queued-jobs limit, in the caller's transaction
   * `tx`, and says how many of its account's jobs are ahead of each. Each account's queue is counted
   * once (queued_counts), under a lock per account taken in one order (batches never deadlock);
   * the count comes in a statement after the locks, so it sees every batch committed before.
   */
  async admitAndInsert(
    jobs: NewJob[],
    now: Date,
    limitOf: (clientId: string) => number,
    tx: PoolClient,
  ): Promise<{ created: Array<{ id: string; clientId: string; ahead: number }>; refused: Map<string, Refusal> }> {
    const clients = [...new Set(jobs.map((j) => j.clientId))].map((c) => tx.escapeLiteral(c)).join(", ");
    const results = (await tx.query(
      `SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtext('ci-platform:gpu-scheduler:queued:' || c) AS h FROM unnest(ARRAY[${clients}]) c) s ORDER BY h;
       SELECT client_id, priority, n FROM gpu_scheduler.queued_counts WHERE client_id IN (${clients}) AND n > 0`,
    )) as unknown as Array<{ rows: Array<{ client_id: string; priority: number; n: number }> }>;
    const queued = new Map<string, Map<number, number>>();
    for (const r of results[1].rows) queued.set(r.client_id, (queued.get(r.client_id) ?? new Map<number, number>()).set(r.priority, r.n));
    const { admitted, refused } = admit(jobs, queued as ReadonlyMap<string, QueuedByPriority>, limitOf);
    if (!admitted.length) return { created: [], refused };
    const seqs = new Map((await this.insert(admitted, now, tx)).map((r) => [r.id, r.seq]));
    const created = admitted.map((j) => ({ id: j.id, clientId: j.clientId, priority: priorityIndex(j.spec.priority), seq: seqs.get(j.id)! }));
    const ahead = aheadInAccount(created, queued);
    return { created: created.map((j) => ({ id: j.id, clientId: j.clientId, ahead: ahead.get(j.id)! })), refused };
  }

  // --- every transition: read, decide (transitions.ts), compare-and-set ---

  /**
   * The decision inputs of these jobs. `output` is only a presence mark ("" when there is some):
   * the decisions test it for null, and a patch never writes back a column it did not set.
   */
  async states(ids: string[]): Promise<Map<string, JobState>> {
    const { rows } = await this.db.query<JobRow>(`SELECT ${STATE_COLUMNS} FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[])`, [ids]);
    return new Map(rows.map((r) => [r.id, toState(r)]));
  }

  /** The decision inputs of the jobs holding a card on `nodeId` (as `states`). */
  async statesOnNode(nodeId: string): Promise<Map<string, JobState>> {
    const { rows } = await this.db.query<JobRow>(`SELECT ${STATE_COLUMNS} FROM gpu_scheduler.jobs WHERE node_id = $1 AND holding`, [nodeId]);
    return new Map(rows.map((r) => [r.id, toState(r)]));
  }

  /**
   * Writes each patch only if the job's status, holding and placement (node, card) are still what
   * its decision saw (compare-and-set); returns the ids written. One statement for the whole batch.
   * `nodeId: null` in a patch clears the whole placement (node, cards, their name, when it was placed);
   * GPU-seconds (the ended attempt's, the account's usage) count seconds × the job's cards;
   * an `endedAttempt` is kept in job_attempts by the same statement, only if its patch is written.
   */
  async compareAndSet(
    updates: Array<{
      id: string;
      seen: Pick<JobState, "status" | "holding" | "nodeId" | "gpuUuid" | "preempting"> & { startedAt?: Date | null };
      patch: JobPatch;
    }>,
  ): Promise<Set<string>> {
    if (!updates.length) return new Set();
    // In id order: concurrent batches lock their rows in one order, so they never wait on each other crosswise.
    updates = [...updates].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const rows = await this.compareAndSetStatement.run<WrittenJob>(this.db, INDEX_READS, compareAndSetValues(updates));
    this.committed(new Map(updates.map((u) => [u.id, u.seen])), rows);
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Writes `patch` (the state machine's cancel, core/transitions.ts `cancelPatch`) to every job of
   * the array not finished yet, in one statement: the jobs are locked in id order and read by it
   * (one cancelled exactly once, whoever else writes them meanwhile), with the same status events,
   * webhook deliveries, usage and dependants as a compare-and-set. Returns the jobs it wrote, each
   * with the status it had (`seen_status`) and its node.
   */
  async cancelUnfinished(arrayId: string, patch: JobPatch): Promise<WrittenJob[]> {
    const unfinished = `SELECT id FROM gpu_scheduler.jobs WHERE array_id = $1 AND status NOT IN ${TERMINAL_SQL}`;
    const { rows } = await this.db.query<WrittenJob>(
      patchStatementSql(
        {
          ids: unfinished,
          source: `(SELECT id, status AS seen_status, $2::jsonb AS patch FROM gpu_scheduler.jobs
                    WHERE array_id = $1 AND status NOT IN ${TERMINAL_SQL} ORDER BY id FOR UPDATE) p`,
          match: `j.id = p.id`,
        },
        this.halfLifeS,
      ),
      [arrayId, JSON.stringify(patch)],
    );
    this.committed(new Map(rows.map((r) => [r.id, { status: r.seen_status!, startedAt: r.started_at }])), rows);
    return rows;
  }

  /** After a write committed: its public status changes published, the ended jobs' dependants due. */
  private committed(seen: Map<string, SeenState>, rows: WrittenJob[]): void {
    const changes = statusChanges(seen, rows, new Date());
    if (changes.length) this.onStatusChanged(changes);
    const ended = rows.filter((r) => r.dependants).map((r) => r.id);
    if (ended.length) this.dependantsDue(ended);
  }

  // --- node loss and housekeeping ---

  /** Nodes that hold a card in the database (to notice a node lost while no replica watched). */
  async nodesHoldingCards(): Promise<string[]> {
    const rows = await readHolding<{ node_id: string }>(this.db, () => `SELECT DISTINCT node_id FROM gpu_scheduler.jobs WHERE holding`);
    return rows.map((r) => r.node_id);
  }

  /** Jobs running now, with their node. */
  async running(): Promise<Array<{ id: string; node_id: string }>> {
    return readHolding(this.db, () => `SELECT id, node_id FROM gpu_scheduler.jobs WHERE holding AND status = 'running'`);
  }

  /** Placements unconfirmed since before `before`. */
  async staleAssigned(before: Date): Promise<Array<{ id: string; node_id: string }>> {
    const { rows } = await this.db.query<{ id: string; node_id: string }>(
      `SELECT id, node_id FROM gpu_scheduler.jobs WHERE status = 'assigned' AND assigned_at < $1`,
      [before],
    );
    return rows;
  }

  /** Queued jobs past their queue deadline, the oldest deadline first, at most `limit` (through jobs_queue_deadline). */
  async expiredQueued(now: Date, limit: number): Promise<Array<{ id: string; queue_timeout_seconds: number }>> {
    const { rows } = await this.db.query<{ id: string; queue_timeout_seconds: number }>(
      `SELECT id, queue_timeout_seconds FROM gpu_scheduler.jobs
       WHERE status = 'queued' AND queue_deadline IS NOT NULL AND queue_deadline <= $1 AND attempts = 0 ORDER BY queue_deadline LIMIT $2`,
      [now, limit],
    );
    return rows;
  }

  /** Ended jobs whose node has not confirmed the card free since before `before`. */
  async staleHolding(before: Date): Promise<Array<{ id: string; node_id: string }>> {
    return readHolding(
      this.db,
      (lit) =>
        `SELECT id, node_id FROM gpu_scheduler.jobs WHERE holding AND status IN ${TERMINAL_SQL} AND completed_at < ${lit(before.toISOString())}::timestamptz`,
    );
  }

  /** Status and placement of the given ids (heartbeat reconciliation); unknown ids are absent. */
  async placements(ids: string[]): Promise<Array<{ id: string; status: StoredStatus; node_id: string | null; exit_code: number | null }>> {
    const { rows } = await this.db.query<{ id: string; status: StoredStatus; node_id: string | null; exit_code: number | null }>(
      `SELECT id, status, node_id, exit_code FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    return rows;
  }
}
