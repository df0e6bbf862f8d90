/**
 * SQL of what the scheduler keeps about nodes beyond its replicas' in-memory views
 * (gpu_scheduler.nodes): operators' drains and the last time a node was declared lost; and which
 * jobs each node holds. A drain is written under the placement lock (placement.repository.ts), so
 * once it returns no placement pass that read the node as ready can still commit.
 */
import type { Pool } from "pg";
import { PLACEMENT_LOCK_SQL } from "./placement.repository";

export type NodeRow = { node_id: string; draining: boolean; drained_at: Date | null; drained_by: string | null; lost_at: Date | null };

const NODE_COLUMNS = "node_id, draining, drained_at, drained_by, lost_at";

export class NodesRepository {
  constructor(private readonly db: Pool) {}

  async all(): Promise<NodeRow[]> {
    const { rows } = await this.db.query<NodeRow>(`SELECT ${NODE_COLUMNS} FROM gpu_scheduler.nodes ORDER BY node_id`);
    return rows;
  }

  async find(nodeId: string): Promise<NodeRow | undefined> {
    const { rows } = await this.db.query<NodeRow>(`SELECT ${NODE_COLUMNS} FROM gpu_scheduler.nodes WHERE node_id = $1`, [nodeId]);
    return rows[0];
  }

  /** The drained nodes (for the clients' cluster status). */
  async drained(): Promise<Set<string>> {
    const { rows } = await this.db.query<{ ids: string[] | null }>(`SELECT array_agg(node_id) AS ids FROM gpu_scheduler.nodes WHERE draining`);
    return new Set(rows[0].ids ?? []);
  }

  /**
   * Drains (`by`: the administrator) or resumes a node; draining again keeps the first drain's
   * time and author. Under the placement lock: waits for a pass deciding now, and every later
   * pass reads it.
   */
  async setDraining(nodeId: string, draining: boolean, by: string, now: Date): Promise<NodeRow> {
    const tx = await this.db.connect();
    try {
      await tx.query("BEGIN");
      await tx.query(PLACEMENT_LOCK_SQL);
      const { rows } = await tx.query<NodeRow>(
        `INSERT INTO gpu_scheduler.nodes AS n (node_id, draining, drained_at, drained_by)
           VALUES ($1, $2, CASE WHEN $2 THEN $4::timestamptz END, CASE WHEN $2 THEN $3::uuid END)
         ON CONFLICT (node_id) DO UPDATE SET draining = $2,
           drained_at = CASE WHEN NOT $2 THEN NULL WHEN n.draining THEN n.drained_at ELSE $4::timestamptz END,
           drained_by = CASE WHEN NOT $2 THEN NULL WHEN n.draining THEN n.drained_by ELSE $3::uuid END
         RETURNING ${NODE_COLUMNS}`,
        [nodeId, draining, by, now],
      );
      await tx.query("COMMIT");
      return rows[0];
    } catch (err) {
      await tx.query("ROLLBACK").catch(() => undefined);
      throw err;
    } finally {
      tx.release();
    }
  }

  /** The scheduler declared the node lost (every replica may record it; the last time wins). */
  async markLost(nodeId: string, at: Date): Promise<void> {
    await this.db.query(
      `INSERT INTO gpu_scheduler.nodes (node_id, lost_at) VALUES ($1, $2)
       ON CONFLICT (node_id) DO UPDATE SET lost_at = GREATEST(gpu_scheduler.nodes.lost_at, EXCLUDED.lost_at)`,
      [nodeId, at],
    );
  }

  /** Jobs placed or running, per node (read through the holding index). */
  async runningByNode(): Promise<Map<string, string[]>> {
    const { rows } = await this.db.query<{ node_id: string; ids: string[] }>(
      `SELECT node_id, array_agg(id::text ORDER BY seq) AS ids FROM gpu_scheduler.jobs
       WHERE holding AND status IN ('assigned', 'running') GROUP BY node_id`,
    );
    return new Map(rows.map((r) => [r.node_id, r.ids]));
  }
}
