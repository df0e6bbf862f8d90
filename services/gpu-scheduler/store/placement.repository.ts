/**
 * SQL of one placement decision (the gpu_scheduler schema's jobs table, as jobs.repository.ts):
 * the snapshot the pure `plan` needs, and the commit of its choice, under a lock that lets one
 * replica decide at a time.
 */
import type { Pool } from "pg";
import { ConnectionStatement } from "../../../lib/db";
import type { ArrayCap, QueuedJob } from "../core/placement";
import type { PreemptibleHolder } from "../core/preemption";
import { MAX_JOB_PREEMPTIONS, type StoredJob } from "../../../lib/job-spec";

export type AssignedJob = {
  id: string;
  /** Its account (a job with platformAccess gets credentials of that account). */
  client_id: string;
  node_id: string;
  gpu_uuid: string;
  /** All the job's cards (the first is gpu_uuid). */
  gpu_uuids: string[];
  /** What the job asked for, as stored (lib/job-spec.ts): handed to its node as it is. */
  spec: StoredJob;
  /** The job's variables: read here only, to hand the job to its node. */
  env: Record<string, string> | null;
  assigned_at: Date;
  /** This placement's attempt (1-based: the placement counts it). */
  attempts: number;
  max_retries: number;
  /** Its array and its index there (CI_ARRAY_ID, CI_ARRAY_INDEX); null for a job of no array. */
  array_id?: string | null;
  array_index?: number | null;
};
/** Taken by each placement decision, and by a drain, so no pass that read the node as ready commits after the drain. */
export const PLACEMENT_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('ci-platform:gpu-scheduler:placement'))";

/** `gpuUuids`: all the job's cards, the first `gpuUuid`; `gpuName`: their one name. */
export type PlacementRow = { jobId: string; nodeId: string; gpuUuid: string; gpuUuids: string[]; gpuName: string };
/** A candidate job (`clientId` and `priority` as placement.ts's QueuedJob). */
export type QueuedRow = QueuedJob;
/** What one placement decision reads: held cards, candidate jobs, and the standing of their accounts. */
export type PlacementSnapshot = {
  /** Every card of every job holding its cards. */
  held: Set<string>;
  queue: QueuedRow[];
  /** Cards each account holds now (accounts holding none are absent). */
  heldBy?: Map<string, number>;
  /** GPU-seconds each account's jobs holding cards may still use: the rest of their timeoutSeconds × cards. */
  inFlight?: Map<string, number>;
  /** The same by card name (each priced at its own credits per GPU-second). */
  inFlightByCard?: Map<string, Map<string, number>>;
  /** GPU-seconds each account of `queue` has used, decayed to now (absent: none). */
  usage?: Map<string, number>;
  /** Nodes an operator drained: none of their cards takes a job (absent: none). */
  drained?: Set<string>;
  /** Preemptible jobs running, which a waiting job may stop (absent: none). */
  preemptible?: PreemptibleHolder[];
  /** The capped arrays of `queue`'s jobs (arrayParallelism), by id. */
  arrays?: Map<string, ArrayCap>;
};

/**
 * A queued job's array as the queue index orders it (migration 17's jobs_queue_by_account): its
 * array, or the nil uuid for a job of none. `t`: a table alias with its dot, or "".
 */
export const ARRAY_KEY = (t: string) => `COALESCE(${t}array_id, '00000000-0000-0000-0000-000000000000'::uuid)`;

/** An account's GPU-seconds decayed to the database's now with half-life `halfLifeS` (SQL over account_usage `u`). */
export const decayedUsageSql = (halfLifeS: number) => `u.gpu_seconds * power(2, -extract(epoch FROM now() - u.at) / ${Number(halfLifeS)})`;

/**
 * How the snapshot is planned, whatever the statistics say: every read in it follows an index in
 * its order, and with statistics taken while the queue was empty (this machine has no autovacuum)
 * the planner would rather read the whole queue through the smallest queue index and sort it
 * (seconds per pass at 20,000 queued jobs instead of milliseconds). A plan that must sort anyway
 * then costs more than jit_above_cost: no JIT (it would compile the query on every pass).
 */
export const SNAPSHOT_PLANNING = "SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off; SET LOCAL jit = off";

/** Planner settings of statements that must read jobs through an index whatever the statistics say (readHolding, the compare-and-set). */
export const INDEX_READS = "SET LOCAL enable_seqscan = off; SET LOCAL jit = off";

/**
 * A read of the few jobs holding a card (held cards, housekeeping), planned with sequential scans
 * off: statistics taken while most jobs held a card would read the whole table, finished jobs and
 * all, instead of the index of held cards. One round trip; values go in as literals (`lit`).
 */
export async function readHolding<R>(db: Pool, sql: (lit: (value: string) => string) => string): Promise<R[]> {
  const tx = await db.connect();
  try {
    const results = (await tx.query(`BEGIN; ${INDEX_READS}; ${sql((v) => tx.escapeLiteral(v))}; COMMIT`)) as unknown as Array<{ rows: R[] }>;
    return results[results.length - 2].rows;
  } catch (err) {
    await tx.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    tx.release();
  }
}

/**
 * The placement snapshot in one row (parameters: $1 now, $2 the schedulable cards): every card holding a job (and per account how many), the first
 * queued jobs of each account and requested type in the account's order (priority, then age), at
 * most as many per pair as there may be free cards (each job takes one at least), and the decayed
 * usage of those accounts. The
 * distinct (account, type, array) triples come from skipping through an index (one probe each; jobs of
 * no array are one triple per account and type), so the
 * cost grows with the accounts waiting, not with the backlog.
 */
export function snapshotSql(halfLifeS: number, defaultTimeoutS = 3600): string {
  const now = "$1::timestamptz";
  const cardCount = "$2::int";
  const timeout = `coalesce(timeout_seconds, ${Number(defaultTimeoutS)})`;
  return `WITH RECURSIVE pairs(c, m, a) AS (
      (SELECT client_id, gpu_match, ${ARRAY_KEY("")} FROM gpu_scheduler.jobs WHERE status = 'queued' ORDER BY client_id, gpu_match, ${ARRAY_KEY("")} LIMIT 1)
      UNION ALL
      SELECT s.client_id, s.gpu_match, s.a FROM pairs,
        LATERAL (SELECT j.client_id, j.gpu_match, ${ARRAY_KEY("j.")} AS a FROM gpu_scheduler.jobs j
                 WHERE j.status = 'queued' AND (j.client_id, j.gpu_match, ${ARRAY_KEY("j.")}) > (pairs.c, pairs.m, pairs.a)
                 ORDER BY j.client_id, j.gpu_match, ${ARRAY_KEY("j.")} LIMIT 1) s),
    held AS (SELECT array_agg(u) AS uuids, count(*) AS n, count(*) FILTER (WHERE preemptible) AS pre FROM gpu_scheduler.jobs, unnest(gpu_uuids) AS u WHERE holding),
    held_by AS (SELECT client_id AS c, coalesce(gpu_name, '') AS g, sum(gpu_count)::int AS n,
        sum(gpu_count * greatest(${timeout} - extract(epoch FROM now() - coalesce(started_at, assigned_at, now())), 0))::float8 AS w
      FROM gpu_scheduler.jobs WHERE holding GROUP BY client_id, gpu_name),
    -- Arrays whose arrayParallelism jobs hold cards (the few held jobs, through jobs_array_holding): none of their jobs is read.
    capped AS (SELECT h.array_id FROM gpu_scheduler.jobs h WHERE h.holding AND h.array_id IS NOT NULL GROUP BY h.array_id
      HAVING count(*) >= (SELECT a.parallelism FROM gpu_scheduler.job_arrays a WHERE a.id = h.array_id)),
    queue AS (
      SELECT q.id, q.gpu_type, q.seq, q.client_id, q.priority, q.gpu_count, q.t, q.array_id, q.preemptible FROM pairs, held,
        LATERAL (SELECT id, gpu_type, seq, client_id, priority, gpu_count, ${timeout} AS t, array_id, preemptible FROM gpu_scheduler.jobs j
                 WHERE j.status = 'queued' AND j.client_id = pairs.c AND j.gpu_match = pairs.m AND ${ARRAY_KEY("j.")} = pairs.a
                   AND (j.not_before IS NULL OR j.not_before <= ${now})
                 -- Ordinary jobs first (they may stop preemptible ones: those cards may come free too).
                 ORDER BY j.preemptible, j.priority DESC, j.seq
                 LIMIT CASE WHEN pairs.a IN (SELECT array_id FROM capped) THEN 0 ELSE GREATEST(${cardCount} - held.n + held.pre, 0) END) q)
    SELECT (SELECT uuids FROM held) AS held, (SELECT json_agg(queue ORDER BY seq) FROM queue) AS queue,
      (SELECT json_agg(held_by) FROM held_by) AS held_by,
      (SELECT json_agg(json_build_object('c', u.client_id, 'u', ${decayedUsageSql(halfLifeS)}))
       FROM gpu_scheduler.account_usage u WHERE u.client_id IN (SELECT client_id FROM queue)) AS usage,
      (SELECT array_agg(node_id) FROM gpu_scheduler.nodes WHERE draining) AS drained,
      (SELECT json_agg(json_build_object('id', id, 'n', node_id, 'u', gpu_uuids, 'p', preempting,
          's', extract(epoch FROM coalesce(started_at, assigned_at)) * 1000))
       FROM gpu_scheduler.jobs WHERE holding AND preemptible AND status = 'running' AND preemptions < ${MAX_JOB_PREEMPTIONS}) AS preemptible,
      (SELECT json_agg(json_build_object('id', a.id, 'p', a.parallelism,
         'n', (SELECT count(*) FROM gpu_scheduler.jobs h WHERE h.holding AND h.array_id = a.id)))
       FROM gpu_scheduler.job_arrays a WHERE a.parallelism IS NOT NULL AND a.id IN (SELECT array_id FROM queue)) AS arrays`;
}

/** Cards held and GPU-seconds in flight per account (and by card name), from rows per (account, card name). */
function heldByAccount(rows: NonNullable<SnapshotRow["held_by"]>): Required<Pick<PlacementSnapshot, "heldBy" | "inFlight" | "inFlightByCard">> {
  const heldBy = new Map<string, number>();
  const inFlight = new Map<string, number>();
  const inFlightByCard = new Map<string, Map<string, number>>();
  for (const { c, g, n, w } of rows) {
    heldBy.set(c, (heldBy.get(c) ?? 0) + n);
    inFlight.set(c, (inFlight.get(c) ?? 0) + Number(w));
    const byCard = inFlightByCard.get(c) ?? new Map<string, number>();
    inFlightByCard.set(c, byCard.set(g, (byCard.get(g) ?? 0) + Number(w)));
  }
  return { heldBy, inFlight, inFlightByCard };
}

type SnapshotRow = {
  held: string[] | null;
  queue: Array<{
    id: string;
    gpu_type: string | null;
    seq: number;
    client_id: string;
    priority: number;
    gpu_count: number;
    t: number;
    preemptible: boolean;
    array_id: string | null;
  }> | null;
  held_by: Array<{ c: string; g: string; n: number; w: number }> | null;
  usage: Array<{ c: string; u: number }> | null;
  drained: string[] | null;
  preemptible: Array<{ id: string; n: string; u: string[]; p: boolean; s: number }> | null;
  arrays: Array<{ id: string; p: number; n: number }> | null;
};

export class PlacementRepository {
  /** `halfLifeS`: FAIR_SHARE_HALF_LIFE_S; `defaultTimeoutS`: JOB_TIMEOUT_S, for a job stored without one. */
  constructor(
    private readonly db: Pool,
    halfLifeS = 3600,
    defaultTimeoutS = 3600,
  ) {
    this.snapshotStatement = new ConnectionStatement(["timestamptz", "int"], snapshotSql(halfLifeS, defaultTimeoutS));
  }

  /**
   * The snapshot, prepared on each connection (lib/db.ts): PostgreSQL plans it once per connection
   * under SNAPSHOT_PLANNING (its plan cost 0.7 to 2 ms a pass, three times its run on a short queue).
   */
  private readonly snapshotStatement: ConnectionStatement;

  /**
   * One placement decision under the placement lock (one replica decides at a time): reads the
   * snapshot, lets `decide` choose, writes the choice. Two round trips: the lock and the read go
   * in one multi-statement query (each statement sees what was committed before it ran, so the read
   * comes after the lock), the write and the commit in another; such queries take no parameters,
   * so values are written as literals escaped by the driver.
   */
  async placeUnderLock(
    cardCount: number,
    decide: (snapshot: PlacementSnapshot) => PlacementRow[] | Promise<PlacementRow[]>,
    now: Date,
  ): Promise<{ planned: number; assigned: AssignedJob[] }> {
    const tx = await this.db.connect();
    try {
      const read = this.snapshotStatement.executeSql(tx, [now.toISOString(), String(Math.max(0, Math.floor(cardCount)))]);
      const results = (await tx.query(`BEGIN; ${SNAPSHOT_PLANNING}; ${PLACEMENT_LOCK_SQL}; ${read}`)) as unknown as Array<{ rows: SnapshotRow[] }>;
      this.snapshotStatement.ran(tx);
      const row = results[results.length - 1].rows[0];
      const queue = (row.queue ?? []).map((q) => ({
        jobId: q.id,
        gpuType: q.gpu_type,
        seq: Number(q.seq),
        clientId: q.client_id,
        priority: q.priority,
        gpuCount: q.gpu_count,
        timeoutSeconds: Number(q.t),
        preemptible: q.preemptible,
        arrayId: q.array_id,
      }));
      const placements = queue.length
        ? await decide({
            held: new Set(row.held ?? []),
            queue,
            ...heldByAccount(row.held_by ?? []),
            usage: new Map((row.usage ?? []).map((u) => [u.c, u.u])),
            drained: new Set(row.drained ?? []),
            preemptible: (row.preemptible ?? []).map((h) => ({ jobId: h.id, nodeId: h.n, gpuUuids: h.u, preempting: h.p, since: Number(h.s) })),
            arrays: new Map((row.arrays ?? []).map((a) => [a.id, { parallelism: a.p, active: Number(a.n) }])),
          })
        : [];
      if (!placements.length) {
        await tx.query("COMMIT");
        return { planned: 0, assigned: [] };
      }
      const lit = (v: string) => tx.escapeLiteral(v);
      const cards = (uuids: string[]) => `ARRAY[${uuids.map(lit).join(", ")}]::text[]`;
      const values = placements.map((p) => `(${lit(p.jobId)}::uuid, ${lit(p.nodeId)}, ${cards(p.gpuUuids)}, ${lit(p.gpuName)})`).join(", ");
      const written = (await tx.query(
        `UPDATE gpu_scheduler.jobs j
         SET status = 'assigned', node_id = p.node_id, gpu_uuid = p.gpu_uuids[1], gpu_uuids = p.gpu_uuids, gpu_name = p.gpu_name, holding = true,
             assigned_at = ${lit(now.toISOString())}::timestamptz, attempts = j.attempts + 1
         FROM (VALUES ${values}) AS p(id, node_id, gpu_uuids, gpu_name)
         WHERE j.id = p.id AND j.id IN (${placements.map((p) => `${lit(p.jobId)}::uuid`).join(", ")}) AND j.status = 'queued' AND j.gpu_count = cardinality(p.gpu_uuids)
         RETURNING j.id, j.client_id, j.node_id, j.gpu_uuid, j.gpu_uuids, j.spec, j.env, j.assigned_at, j.attempts, j.max_retries, j.array_id, j.array_index;
         COMMIT`,
      )) as unknown as Array<{ rows: AssignedJob[] }>;
      return { planned: placements.length, assigned: written[0].rows };
    } catch (err) {
      await tx.query("ROLLBACK").catch(() => undefined);
      await this.snapshotStatement.failed(tx);
      throw err;
    } finally {
      tx.release();
    }
  }

  /**
   * Whether any job waits (checked before taking the placement lock). The order by seq makes it one
   * probe of jobs_queue whatever the statistics say (EXISTS alone may be planned as a scan of the table).
   */
  async anyQueued(): Promise<boolean> {
    const { rows } = await this.db.query(`SELECT 1 FROM gpu_scheduler.jobs WHERE status = 'queued' ORDER BY seq LIMIT 1`);
    return rows.length > 0;
  }

  /** Cards holding a job, every card of each (for the status). */
  async heldCards(): Promise<Set<string>> {
    const rows = await readHolding<{ held: string[] | null }>(
      this.db,
      () => `SELECT array_agg(u) AS held FROM gpu_scheduler.jobs, unnest(gpu_uuids) AS u WHERE holding`,
    );
    return new Set(rows[0].held ?? []);
  }
}
