/** SQL of job arrays (migration 17's job_arrays, and their jobs in jobs and jobs_history). */
import type { Pool } from "pg";
import type { StoredStatus } from "../core/transitions";

export type ArrayMember = { id: string; status: StoredStatus; started_at: Date | null };

export class ArraysRepository {
  constructor(private readonly db: Pool) {}

  /** The account's array (another account's is absent, as one that does not exist). */
  async findForClient(id: string, clientId: string): Promise<{ id: string; total: number } | undefined> {
    const { rows } = await this.db.query<{ id: string; total: number }>(`SELECT id, total FROM gpu_scheduler.job_arrays WHERE id = $1 AND client_id = $2`, [
      id,
      clientId,
    ]);
    return rows[0];
  }

  /** Every job of the array, in index order, queued or archived (through each table's array index). */
  async members(id: string): Promise<ArrayMember[]> {
    const { rows } = await this.db.query<ArrayMember & { array_index: number }>(
      `SELECT id, status, started_at, array_index FROM gpu_scheduler.jobs WHERE array_id = $1
       UNION ALL SELECT id, status, started_at, array_index FROM gpu_scheduler.jobs_history WHERE array_id = $1
       ORDER BY array_index`,
      [id],
    );
    return rows;
  }
}
