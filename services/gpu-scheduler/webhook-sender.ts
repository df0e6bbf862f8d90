/**
 * Drains the webhook delivery queue: every WEBHOOK_POLL_MS, and at once when this replica commits
 * or hears of a terminal status. Each due delivery is claimed (webhooks.repository.ts), its job's
 * detail read, the body signed with the account's current secret (from auth), the URL checked and
 * resolved again, and POSTed to the checked address (webhook-delivery.ts, webhook-target.ts).
 */
import type { LoggerInstance } from "moleculer";
import type { JobDetail } from "./contract";
import { AttemptResult, postOnce, retryDelayS, signedHeaders } from "./webhook-delivery";
import { Lookup, resolveTarget } from "./webhook-target";
import type { DeliveryRow, WebhooksRepository } from "./webhooks.repository";

export type WebhookSettings = {
  /** WEBHOOK_ALLOW_PRIVATE: private, loopback and link-local targets allowed (a closed network's receivers). */
  allowPrivate: boolean;
  /** WEBHOOK_RETRY_DELAYS_S: the waits after each failed attempt; once spent the delivery is failed. */
  retryDelaysS: number[];
  /** WEBHOOK_TIMEOUT_MS: an attempt without a 2xx answer within this has failed. */
  timeoutMs: number;
  /** WEBHOOK_POLL_MS: how often each replica looks for due deliveries. */
  pollMs: number;
};

export type SenderPorts = {
  repo: WebhooksRepository;
  /** The job's detail as its GET shows it (null: gone). */
  detail(jobId: string): Promise<JobDetail | null>;
  /** The account's signing secret (null: none). */
  secret(clientId: string): Promise<string | null>;
  lookup: Lookup;
  post: typeof postOnce;
  now(): Date;
};

/** Deliveries claimed per pass (sent concurrently). */
const BATCH = 50;

export class WebhookSender {
  private timer?: NodeJS.Timeout;
  /** The pass under way. */
  private pass?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly ports: SenderPorts,
    private readonly settings: WebhookSettings,
    private readonly logger: LoggerInstance,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.wake(), this.settings.pollMs);
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    while (this.pass) await this.pass;
  }

  /** Looks for due deliveries now (a pass under way runs once more). */
  wake(): void {
    if (this.stopped) return;
    if (this.pass) {
      this.again = true;
      return;
    }
    this.pass = this.drain()
      .catch((err) => this.logger.warn(`Webhook deliveries not sent: ${(err as Error).message}`))
      .finally(() => {
        this.pass = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async drain(): Promise<void> {
    // An attempt takes at most timeoutMs (plus DNS and the job's read): the lease outlasts it.
    const leaseMs = this.settings.timeoutMs * 2 + 30_000;
    for (;;) {
      const due = await this.ports.repo.claim(BATCH, leaseMs);
      await Promise.all(due.map((d) => this.deliver(d)));
      if (due.length < BATCH || this.stopped) return;
    }
  }

  private async deliver(d: DeliveryRow): Promise<void> {
    const result = await this.attempt(d).catch((err): AttemptResult => ({ ok: false, statusCode: null, error: (err as Error).message }));
    const retryInS = result.ok ? null : retryDelayS(d.attempts, this.settings.retryDelaysS);
    await this.ports.repo.record(d.id, { ...result, retryInS });
    if (!result.ok) this.logger.info(`Webhook ${d.id} (job ${d.job_id}) attempt ${d.attempts} failed: ${result.error}`);
  }

  private async attempt(d: DeliveryRow): Promise<AttemptResult> {
    const [job, secret] = await Promise.all([this.ports.detail(d.job_id), this.ports.secret(d.client_id)]);
    if (!job) return { ok: false, statusCode: null, error: "the job no longer exists" };
    if (!secret) return { ok: false, statusCode: null, error: "the account has no webhook secret" };
    const target = await resolveTarget(d.url, this.ports.lookup, this.settings.allowPrivate);
    if (!target.ok) return { ok: false, statusCode: null, error: `refused: the URL ${target.reason}` };
    const now = this.ports.now();
    const body = JSON.stringify({ type: d.type, timestamp: now.toISOString(), data: job });
    const headers = signedHeaders(secret, d.id, Math.floor(now.getTime() / 1000), body);
    return this.ports.post(target.url, target.address, target.family, headers, body, this.settings.timeoutMs);
  }
}
