/**
 * A batch's end as a signed Standard Webhooks event (`batch.completed`, `batch.failed`,
 * `batch.expired`, the batch object as `data`) to its `metadata.webhookUrl`, when the account has
 * a webhook secret: the jobs' signing, SSRF check and one-attempt POST (gpu-scheduler/webhooks),
 * the same retry schedule (WEBHOOK_RETRY_DELAYS_S). Due deliveries are claimed from the batch
 * rows with SKIP LOCKED under a lease, so each goes out from one replica, again after a crash
 * (at-least-once; the webhook-id stays the same).
 */
import type { LoggerInstance } from "moleculer";
import { withTimeout } from "../../../lib/health";
import { postOnce, retryDelayS, signedHeaders } from "../../gpu-scheduler/webhooks/webhook-delivery";
import { Lookup, resolveTarget } from "../../gpu-scheduler/webhooks/webhook-target";
import { batchObject } from "./batch-views";
import type { BatchesRepository, BatchRow } from "./batches.repository";

export type BatchWebhookSettings = { allowPrivate: boolean; retryDelaysS: number[]; timeoutMs: number };

export type BatchWebhookPorts = {
  batches: Pick<BatchesRepository, "claimWebhooks" | "webhookAttempted">;
  /** The account's signing secret (null: none). */
  secret(clientId: string): Promise<string | null>;
  lookup: Lookup;
  post: typeof postOnce;
  now(): Date;
};

const PER_ROUND = 10;

export class BatchWebhooks {
  private delivering?: Promise<void>;

  constructor(
    private readonly ports: BatchWebhookPorts,
    private readonly settings: BatchWebhookSettings,
    private readonly logger: LoggerInstance,
  ) {}

  /** Sends what is due, unless a round is under way (the next tick takes the rest). */
  wake(): void {
    this.delivering ??= this.round()
      .catch((err) => this.logger.warn(`Batch webhooks not sent: ${(err as Error).message}`))
      .finally(() => (this.delivering = undefined));
  }

  async stop(): Promise<void> {
    await this.delivering;
  }

  private async round(): Promise<void> {
    // An attempt takes at most 2 × timeoutMs (DNS, then the POST): the lease outlasts it.
    const due = await this.ports.batches.claimWebhooks(PER_ROUND, this.settings.timeoutMs * 2 + 30_000);
    await Promise.all(due.map((b) => this.deliver(b)));
  }

  private async deliver(b: BatchRow & { webhook_attempts: number }): Promise<void> {
    const secret = await this.ports.secret(b.client_id);
    // No secret: nothing is sent (API-DECISIONS: only an account with a webhook secret gets them).
    if (!secret) return this.ports.batches.webhookAttempted(b.id, false, null);
    const result = await this.attempt(b, secret).catch((err) => ({ ok: false, error: (err as Error).message }));
    const retryInS = result.ok ? null : retryDelayS(b.webhook_attempts, this.settings.retryDelaysS);
    if (!result.ok) this.logger.info(`Webhook of batch ${b.id} attempt ${b.webhook_attempts} failed: ${result.error}`);
    await this.ports.batches.webhookAttempted(b.id, result.ok, retryInS);
  }

  private async attempt(b: BatchRow, secret: string): Promise<{ ok: boolean; error: string | null }> {
    const lookup: Lookup = (host) => withTimeout(this.ports.lookup(host), this.settings.timeoutMs);
    const target = await resolveTarget(b.metadata?.webhookUrl ?? "", lookup, this.settings.allowPrivate);
    if (!target.ok) return { ok: false, error: `refused: the URL ${target.reason}` };
    const now = this.ports.now();
    const body = JSON.stringify({ type: `batch.${b.status}`, timestamp: now.toISOString(), data: batchObject(b) });
    const headers = signedHeaders(secret, `${b.id}.${b.status}`, Math.floor(now.getTime() / 1000), body);
    return this.ports.post(target.url, target.address, target.family, headers, body, this.settings.timeoutMs);
  }
}
