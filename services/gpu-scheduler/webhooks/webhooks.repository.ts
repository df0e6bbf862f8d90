/**
 * SQL of the webhook delivery queue (gpu_scheduler.webhook_deliveries; rows are queued by the
 * compare-and-set that commits a job's terminal status, jobs.repository.ts). Any replica claims
 * due rows with SKIP LOCKED and a lease: a sender that dies mid-attempt leaves its row to be
 * claimed again once the lease ends (at-least-once; the row's id is the webhook-id throughout).
 */
import type { Pool } from "pg";
import type { WebhookDeliveryView } from "../contract";
import type { WebhookType } from "./webhook-delivery";

export type DeliveryRow = { id: string; client_id: string; job_id: string; type: WebhookType; url: string; attempts: number };

type ListedRow = DeliveryRow & {
  status: WebhookDeliveryView["status"];
  last_status_code: number | null;
  last_error: string | null;
  delivered_at: Date | null;
  next_attempt_at: Date | null;
};

export class WebhooksRepository {
  constructor(private readonly db: Pool) {}

  /**
   * Up to `limit` due deliveries, each counted as attempted and leased for `leaseMs` (its attempt's
   * time and then some), at most `perAccount` in flight per account counting `inFlight` (this
   * replica's): each account's oldest first, taken round-robin, so no account's backlog holds up another's.
   */
  async claim(limit: number, perAccount: number, inFlight: ReadonlyMap<string, number>, leaseMs: number): Promise<DeliveryRow[]> {
    const { rows } = await this.db.query<DeliveryRow>(
      `WITH busy AS (SELECT * FROM unnest($3::uuid[], $4::int[]) AS b(client_id, in_flight)),
       due AS (SELECT d.id, d.next_attempt_at,
                      coalesce(b.in_flight, 0) + row_number() OVER (PARTITION BY d.client_id ORDER BY d.next_attempt_at, d.id) AS slot
               FROM gpu_scheduler.webhook_deliveries d LEFT JOIN busy b ON b.client_id = d.client_id
               WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND coalesce(b.in_flight, 0) < $5),
       picked AS (SELECT id FROM due WHERE slot <= $5 ORDER BY slot, next_attempt_at LIMIT $1)
       UPDATE gpu_scheduler.webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $2::float8 / 1000)
       WHERE d.id IN (SELECT id FROM gpu_scheduler.webhook_deliveries WHERE id IN (SELECT id FROM picked) AND status = 'pending' AND next_attempt_at <= now()
                      FOR UPDATE SKIP LOCKED)
       RETURNING d.id, d.client_id, d.job_id, d.type, d.url, d.attempts`,
      [limit, leaseMs, [...inFlight.keys()], [...inFlight.values()], perAccount],
    );
    return rows;
  }

  /** The outcome of an attempt: delivered; or pending again after `retryInS`; or failed (null: retries spent). */
  async record(id: string, outcome: { ok: boolean; statusCode: number | null; error: string | null; retryInS: number | null }): Promise<void> {
    await this.db.query(
      `UPDATE gpu_scheduler.webhook_deliveries SET last_status_code = $2, last_error = $3,
         status = CASE WHEN $4 THEN 'delivered' WHEN $5::float8 IS NULL THEN 'failed' ELSE 'pending' END,
         delivered_at = CASE WHEN $4 THEN now() ELSE NULL END,
         next_attempt_at = CASE WHEN $4 OR $5::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $5::float8) END
       WHERE id = $1 AND status = 'pending'`,
      [id, outcome.statusCode, outcome.error, outcome.ok, outcome.retryInS],
    );
  }

  /** The account's most recent deliveries, newest first. */
  async listForClient(clientId: string, limit: number): Promise<WebhookDeliveryView[]> {
    const { rows } = await this.db.query<ListedRow>(
      `SELECT id, client_id, job_id, type, url, status, attempts, last_status_code, last_error, delivered_at, next_attempt_at
       FROM gpu_scheduler.webhook_deliveries WHERE client_id = $1 ORDER BY created_at DESC, id LIMIT $2`,
      [clientId, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      type: r.type,
      jobId: r.job_id,
      url: r.url,
      status: r.status,
      attempts: r.attempts,
      lastStatusCode: r.last_status_code,
      lastError: r.last_error,
      deliveredAt: r.delivered_at?.toISOString() ?? null,
      nextAttemptAt: r.status === "pending" ? (r.next_attempt_at?.toISOString() ?? null) : null,
    }));
  }
}

/**
 * Migration 10 (webhooks):
 * webhook_url: the job's (echoed in its detail). webhook_deliveries: the durable queue of
 * webhook sends, one per job (its terminal status), written by the same statement that commits
 * that status (jobs.repository.ts compareAndSet), so no restart loses one. A sender claims due
 * rows with SKIP LOCKED and a lease (next_attempt_at moves past the attempt's time limit).
 */
export const WEBHOOK_DELIVERIES_TABLE = `
      ALTER TABLE jobs ADD COLUMN webhook_url text CHECK (char_length(webhook_url) <= 2048);
      CREATE TABLE webhook_deliveries (
        id uuid PRIMARY KEY,
        client_id uuid NOT NULL,
        job_id uuid NOT NULL UNIQUE,
        type text NOT NULL CHECK (type IN ('job.completed', 'job.failed', 'job.cancelled')),
        url text NOT NULL,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        last_status_code integer,
        last_error text,
        created_at timestamptz NOT NULL DEFAULT now(),
        delivered_at timestamptz,
        next_attempt_at timestamptz
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
      CREATE INDEX webhook_deliveries_by_client ON webhook_deliveries (client_id, created_at DESC);
`;

/**
 * Migration 13 (webhook deliveries retention):
 * Settled deliveries (delivered or failed), oldest first: what housekeeping removes after
 * GPU_JOB_RETENTION_DAYS (job-history.ts), in bounded batches.
 */
export const WEBHOOK_DELIVERIES_SETTLED = `
      CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (created_at) WHERE status <> 'pending';
`;
