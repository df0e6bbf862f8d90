/**
 * Every account's jobs for operators (GET /api/admin/jobs), archived ones included: newest first,
 * filtered by status and account, in pages keyed by the job's sequence number (global, so the two
 * tables merge). A public status spans stored ones (a placed job still shows `queued`), so each
 * stored status is read through its own index range in each table that can hold it (jobs_by_status,
 * jobs_by_client_status and their jobs_history twins) and the ranges are merged: no scan of the history.
 */
import type { Pool } from "pg";
import { isTerminal, PublicStatus } from "../core/transitions";
import { rangesShowing, startedSql, StatusRange } from "../core/public-status";
import { COLUMNS, JobRow } from "./job-row";

export type JobSearch = { status?: PublicStatus; clientId?: string; limit: number; before?: string };
/** `seq`: bigint, which pg hands over as a string. */
export type FoundJob = JobRow & { seq: string };

export class JobSearchRepository {
  constructor(private readonly db: Pool) {}

  /** One page, and the cursor of the next (null when this page is the last). */
  async search(q: JobSearch): Promise<{ rows: FoundJob[]; nextCursor: string | null }> {
    const params: unknown[] = [q.limit + 1];
    const common: string[] = [];
    if (q.clientId !== undefined) common.push(`client_id = $${params.push(q.clientId)}::uuid`);
    if (q.before !== undefined) common.push(`seq < $${params.push(q.before)}::bigint`);
    // The stored statuses (with a start condition) a client sees as the status (transitions.ts PUBLIC_STATUS_TABLE).
    const ranges: Array<StatusRange | undefined> = q.status ? rangesShowing(q.status) : [undefined];
    const parts = ranges.flatMap((r) => {
      const started = r && startedSql(r);
      const where = [...common, ...(r ? [`status = $${params.push(r.stored)}`] : []), ...(started ? [started] : [])];
      // job-history.ts archives ended jobs only.
      const tables = !r || isTerminal(r.stored) ? ["jobs", "jobs_history"] : ["jobs"];
      // One statement: a job being archived meanwhile is seen in one table, never both or neither.
      return tables.map(
        (t) => `(SELECT ${COLUMNS}, seq FROM gpu_scheduler.${t} ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq DESC LIMIT $1)`,
      );
    });
    const sql = parts.length === 1 ? parts[0] : `SELECT * FROM (${parts.join(" UNION ALL ")}) j ORDER BY seq DESC LIMIT $1`;
    const { rows } = await this.db.query<FoundJob>(sql, params);
    const page = rows.slice(0, q.limit);
    return { rows: page, nextCursor: rows.length > q.limit ? page[page.length - 1].seq : null };
  }
}
