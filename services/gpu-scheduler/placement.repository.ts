/**
 * SQL of one placement decision (the gpu_scheduler schema's jobs table, as jobs.repository.ts):
 * the snapshot the pure `plan` needs, and the commit of its choice, under a lock that lets one
 * replica decide at a time.
 */
import type { Pool } from "pg";

export type AssignedJob = {
  id: string;
  node_id: string;
  gpu_uuid: string;
  command: string;
  container_image: string | null;
  timeout_seconds: number | null;
  /** The job's variables: read here only, to hand the job to its node. */
  env: Record<string, string> | null;
  assigned_at: Date;
  /** This placement's attempt (1-based: the placement counts it). */
  attempts: number;
  max_retries: number;
};
export type PlacementRow = { jobId: string; nodeId: string; gpuUuid: string; gpuName: string };
export type QueuedRow = { jobId: string; gpuType: string | null; seq: number };

/**
 * The placement snapshot in one row: the cards holding a job, and the oldest queued jobs of each
 * requested type, at most as many per type as there may be free cards. The distinct types come
 * from skipping through an index (one probe per type), so the cost does not grow with the backlog.
 */
function snapshotSql(cardCount: number, nowLiteral: string): string {
  return `WITH RECURSIVE types(m) AS (
      (SELECT gpu_match FROM gpu_scheduler.jobs WHERE status = 'queued' ORDER BY gpu_match LIMIT 1)
      UNION ALL
      SELECT (SELECT j.gpu_match FROM gpu_scheduler.jobs j
              WHERE j.status = 'queued' AND j.gpu_match > types.m ORDER BY j.gpu_match LIMIT 1)
      FROM types WHERE types.m IS NOT NULL),
    held AS (SELECT array_agg(gpu_uuid) AS uuids, count(*) AS n FROM gpu_scheduler.jobs WHERE holding),
    queue AS (
      SELECT q.id, q.gpu_type, q.seq FROM types, held,
        LATERAL (SELECT id, gpu_type, seq FROM gpu_scheduler.jobs j
                 WHERE j.status = 'queued' AND j.gpu_match = types.m AND (j.not_before IS NULL OR j.not_before <= ${nowLiteral}::timestamptz)
                 ORDER BY j.seq LIMIT GREATEST(${cardCount} - held.n, 0)) q
      WHERE types.m IS NOT NULL)
    SELECT (SELECT uuids FROM held) AS held, (SELECT json_agg(queue ORDER BY seq) FROM queue) AS queue`;
}

export class PlacementRepository {
  constructor(private readonly db: Pool) {}

  /**
   * One placement decision under the placement lock (one replica decides at a time): reads the
   * snapshot, lets `decide` choose, writes the choice. Two round trips: the lock and the read go
   * in one multi-statement query (each statement sees what was committed before it ran, so the read
   * comes after the lock), the write and the commit in another; such queries take no parameters,
   * so values are written as literals escaped by the driver.
   */
  async placeUnderLock(
    cardCount: number,
    decide: (snapshot: { held: Set<string>; queue: QueuedRow[] }) => PlacementRow[],
    now: Date,
  ): Promise<{ planned: number; assigned: AssignedJob[] }> {
    const tx = await this.db.connect();
    try {
      const results = (await tx.query(
        `BEGIN;
         SELECT pg_advisory_xact_lock(hashtext('ci-platform:gpu-scheduler:placement'));
         ${snapshotSql(Math.max(0, Math.floor(cardCount)), tx.escapeLiteral(now.toISOString()))}`,
      )) as unknown as Array<{ rows: Array<{ held: string[] | null; queue: Array<{ id: string; gpu_type: string | null; seq: number }> | null }> }>;
      const row = results[2].rows[0];
      const queue = (row.queue ?? []).map((q) => ({ jobId: q.id, gpuType: q.gpu_type, seq: Number(q.seq) }));
      const placements = queue.length ? decide({ held: new Set(row.held ?? []), queue }) : [];
      if (!placements.length) {
        await tx.query("COMMIT");
        return { planned: 0, assigned: [] };
      }
      const lit = (v: string) => tx.escapeLiteral(v);
      const values = placements.map((p) => `(${lit(p.jobId)}::uuid, ${lit(p.nodeId)}, ${lit(p.gpuUuid)}, ${lit(p.gpuName)})`).join(", ");
      const written = (await tx.query(
        `UPDATE gpu_scheduler.jobs j
         SET status = 'assigned', node_id = p.node_id, gpu_uuid = p.gpu_uuid, gpu_name = p.gpu_name, holding = true,
             assigned_at = ${lit(now.toISOString())}::timestamptz, attempts = j.attempts + 1
         FROM (VALUES ${values}) AS p(id, node_id, gpu_uuid, gpu_name)
         WHERE j.id = p.id AND j.status = 'queued'
         RETURNING j.id, j.node_id, j.gpu_uuid, j.command, j.container_image, j.timeout_seconds, j.env, j.assigned_at, j.attempts, j.max_retries;
         COMMIT`,
      )) as unknown as Array<{ rows: AssignedJob[] }>;
      return { planned: placements.length, assigned: written[0].rows };
    } catch (err) {
      await tx.query("ROLLBACK").catch(() => undefined);
      throw err;
    } finally {
      tx.release();
    }
  }

  /** Whether any job waits (checked before taking the placement lock). */
  async anyQueued(): Promise<boolean> {
    const { rows } = await this.db.query<{ queued: boolean }>(`SELECT EXISTS (SELECT 1 FROM gpu_scheduler.jobs WHERE status = 'queued') AS queued`);
    return rows[0].queued;
  }

  /** Cards holding a job (for the status). */
  async heldCards(): Promise<Set<string>> {
    const { rows } = await this.db.query<{ held: string[] | null }>(`SELECT array_agg(gpu_uuid) AS held FROM gpu_scheduler.jobs WHERE holding`);
    return new Set(rows[0].held ?? []);
  }
}
