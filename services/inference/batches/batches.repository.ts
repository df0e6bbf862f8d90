/**
 * inference.batches: a batch's row, its status moving by compare-and-set only (so two replicas
 * never both move it), and its counts. Lines: lines.repository.ts. Every read is the account's own.
 */
import type { Pool, PoolClient } from "pg";
import { Page, pageClause } from "./files.repository";

export type BatchStatus = "validating" | "in_progress" | "finalizing" | "completed" | "failed" | "expired" | "cancelling" | "cancelled";

export type BatchRow = {
  id: string;
  client_id: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  metadata: Record<string, string> | null;
  status: BatchStatus;
  total: number;
  completed: number;
  failed: number;
  errors: Array<{ code: string; message: string; line: number | null; param: string | null }> | null;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: Date;
  expires_at: Date;
  in_progress_at: Date | null;
  finalizing_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  expired_at: Date | null;
  cancelling_at: Date | null;
  cancelled_at: Date | null;
};

export type NewBatch = Pick<BatchRow, "id" | "client_id" | "endpoint" | "input_file_id" | "completion_window" | "metadata"> & {
  windowS: number;
  allowedModels: readonly string[] | null;
  /** The restricted token that created it (null: a JWT or an API key): its lines are charged to it, up to its maxCredits. */
  tokenId: string | null;
};

const COLUMNS = `id, client_id, endpoint, input_file_id, completion_window, metadata, status, total, completed, failed, errors,
  output_file_id, error_file_id, created_at, expires_at, in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at`;

/** A batch's output and error files, and the lines each holds. */
export type EndFiles = { output: string | null; error: string | null; completed: number; failed: number };

/** The end statuses and the column stamping each. */
export const FINAL_AT: Partial<Record<BatchStatus, string>> = {
  completed: "completed_at",
  failed: "failed_at",
  expired: "expired_at",
  cancelled: "cancelled_at",
};

export class BatchesRepository {
  constructor(private readonly db: Pool) {}

  async create(b: NewBatch): Promise<BatchRow> {
    const { rows } = await this.db.query<BatchRow>(
      `INSERT INTO inference.batches (id, client_id, endpoint, input_file_id, completion_window, metadata, status, expires_at, allowed_models, token_id)
       VALUES ($1, $2, $3, $4, $5, $6, 'validating', now() + make_interval(secs => $7), $8, $9) RETURNING ${COLUMNS}`,
      [b.id, b.client_id, b.endpoint, b.input_file_id, b.completion_window, b.metadata, b.windowS, b.allowedModels, b.tokenId],
    );
    return rows[0];
  }

  async get(clientId: string, id: string, client: Pool | PoolClient = this.db): Promise<BatchRow | undefined> {
    const { rows } = await client.query<BatchRow>(`SELECT ${COLUMNS} FROM inference.batches WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return rows[0];
  }

  async list(clientId: string, page: Page): Promise<BatchRow[]> {
    const { rows } = await this.db.query<BatchRow>(
      `SELECT ${COLUMNS} FROM inference.batches WHERE client_id = $1 ${pageClause("inference.batches", page, "$1", "$2")} LIMIT $3`,
      [clientId, page.after ?? null, page.limit + 1],
    );
    return rows;
  }

  /** validating or in_progress → cancelling; undefined: no such batch of the account's, or past cancelling. */
  async cancel(clientId: string, id: string): Promise<BatchRow | undefined> {
    const { rows } = await this.db.query<BatchRow>(
      `UPDATE inference.batches SET status = 'cancelling', cancelling_at = now()
       WHERE id = $1 AND client_id = $2 AND status IN ('validating', 'in_progress') RETURNING ${COLUMNS}`,
      [id, clientId],
    );
    return rows[0];
  }

  /** Locks one batch in `status` (another replica's is skipped) for the transaction of `client`. */
  async lockOne(client: PoolClient, statuses: BatchStatus[], where = "true"): Promise<BatchRow | undefined> {
    const { rows } = await client.query<BatchRow>(
      `SELECT ${COLUMNS} FROM inference.batches WHERE status = ANY($1::text[]) AND ${where}
       ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED`,
      [statuses],
    );
    return rows[0];
  }

  /** validating → in_progress with its line count, or → failed with its errors. */
  async started(client: PoolClient, id: string, total: number): Promise<void> {
    await client.query("UPDATE inference.batches SET status = 'in_progress', in_progress_at = now(), total = $2 WHERE id = $1 AND status = 'validating'", [
      id,
      total,
    ]);
  }

  async failed(client: PoolClient, id: string, errors: NonNullable<BatchRow["errors"]>, webhook: boolean): Promise<void> {
    await client.query(
      `UPDATE inference.batches SET status = 'failed', failed_at = now(), errors = $2,
         webhook_status = CASE WHEN $3 THEN 'pending' END, webhook_next_at = now() WHERE id = $1`,
      [id, JSON.stringify(errors), webhook],
    );
  }

  /** in_progress batches with every line finished → finalizing (the statement that sees it first moves it). */
  async finishedToFinalizing(): Promise<number> {
    const { rowCount } = await this.db.query(
      `UPDATE inference.batches b SET status = 'finalizing', finalizing_at = now()
       WHERE b.status = 'in_progress'
         AND NOT EXISTS (SELECT 1 FROM inference.batch_lines l WHERE l.batch_id = b.id AND l.status IN ('pending', 'running'))`,
    );
    return rowCount ?? 0;
  }

  /**
   * The running batches' counts from their lines, once per runner tick (a finish counts nothing itself:
   * 16 lines in flight would queue on the batch row's lock). A batch locked (ending) is skipped.
   */
  async refreshCounts(): Promise<void> {
    await this.db.query(
      `WITH open AS (SELECT id FROM inference.batches WHERE status IN ('in_progress', 'cancelling') ORDER BY id FOR UPDATE SKIP LOCKED),
       counts AS (SELECT l.batch_id, count(*) FILTER (WHERE l.status = 'succeeded')::int AS completed,
                    count(*) FILTER (WHERE l.status = 'failed')::int AS failed
                  FROM inference.batch_lines l WHERE l.batch_id IN (SELECT id FROM open) AND l.status IN ('succeeded', 'failed')
                  GROUP BY l.batch_id)
       UPDATE inference.batches b SET completed = c.completed, failed = c.failed FROM counts c
       WHERE b.id = c.batch_id AND (b.completed, b.failed) IS DISTINCT FROM (c.completed, c.failed)`,
    );
  }

  /** The batch's end: its files, its final counts, its status and when, and its webhook due (when it has one). */
  async ended(client: PoolClient, id: string, status: BatchStatus, files: EndFiles, webhook: boolean) {
    await client.query(
      `UPDATE inference.batches SET status = $2, ${FINAL_AT[status]} = now(), output_file_id = $3, error_file_id = $4,
         webhook_status = CASE WHEN $5 THEN 'pending' END, webhook_next_at = now(),
         finalizing_at = coalesce(finalizing_at, CASE WHEN $2 IN ('completed', 'expired') THEN now() END),
         completed = $6, failed = $7
       WHERE id = $1`,
      [id, status, files.output, files.error, webhook, files.completed, files.failed],
    );
  }

  /** Up to `limit` batches whose webhook is due, each counted as attempted and leased for `leaseMs` (SKIP LOCKED: one replica each). */
  async claimWebhooks(limit: number, leaseMs: number): Promise<Array<BatchRow & { webhook_attempts: number }>> {
    const { rows } = await this.db.query<BatchRow & { webhook_attempts: number }>(
      `UPDATE inference.batches SET webhook_attempts = webhook_attempts + 1, webhook_next_at = now() + make_interval(secs => $2::float8 / 1000)
       WHERE id IN (SELECT id FROM inference.batches WHERE webhook_status = 'pending' AND webhook_next_at <= now()
                    ORDER BY webhook_next_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       RETURNING ${COLUMNS}, webhook_attempts`,
      [limit, leaseMs],
    );
    return rows;
  }

  /** A webhook attempt's outcome: delivered; pending again after `retryInS`; or failed (null: retries spent). */
  async webhookAttempted(id: string, ok: boolean, retryInS: number | null): Promise<void> {
    await this.db.query(
      `UPDATE inference.batches SET webhook_status = CASE WHEN $2 THEN 'delivered' WHEN $3::float8 IS NULL THEN 'failed' ELSE 'pending' END,
         webhook_next_at = CASE WHEN $3::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $3::float8) END
       WHERE id = $1 AND webhook_status = 'pending'`,
      [id, ok, retryInS],
    );
  }
}
