/**
 * Drains the webhook delivery queue: every WEBHOOK_POLL_MS, at once when this replica commits or
 * hears of a terminal status, and whenever a delivery settles. Each due delivery is claimed
 * (webhooks.repository.ts: at most WEBHOOK_ACCOUNT_CONCURRENCY in flight per account, accounts
 * round-robin), its job's detail read, the body signed with the account's current secret (from
 * auth), the URL checked and resolved again, and POSTed to the checked address (webhook-delivery.ts,
 * webhook-target.ts). Each delivery settles on its own: a slow receiver holds only its own slots.
 */
import type { LoggerInstance } from "moleculer";
import { withTimeout } from "../../../lib/health";
import { ClaimLoop } from "../../../lib/claim-loop";
import type { JobDetail } from "../contract";
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
  /** WEBHOOK_CONCURRENCY: deliveries in flight at once in one replica. */
  concurrency: number;
  /** WEBHOOK_ACCOUNT_CONCURRENCY: deliveries of one account in flight at once in one replica. */
  accountConcurrency: number;
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

export class WebhookSender extends ClaimLoop {
  constructor(
    private readonly ports: SenderPorts,
    private readonly settings: WebhookSettings,
    logger: LoggerInstance,
  ) {
    super(settings.pollMs, logger, "Webhook deliveries not claimed");
  }

  /** Claims due deliveries for the free slots now; each settles on its own (lib/claim-loop.ts). */
  protected async claim(): Promise<void> {
    const free = this.settings.concurrency - this.busy;
    if (free <= 0) return;
    // An attempt takes at most 2 x timeoutMs (DNS, then the POST; plus the job's read): the lease outlasts it.
    const leaseMs = this.settings.timeoutMs * 2 + 30_000;
    const due = await this.ports.repo.claim(free, this.settings.accountConcurrency, this.inFlight, leaseMs);
    for (const d of due)
      this.launch(
        d.client_id,
        () => this.deliver(d),
        (err) => `Webhook ${d.id} not recorded: ${err.message}`,
      );
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
    // A name whose DNS never answers holds the slot for at most timeoutMs, like a receiver that never does.
    const lookup: Lookup = (host) => withTimeout(this.ports.lookup(host), this.settings.timeoutMs);
    const target = await resolveTarget(d.url, lookup, this.settings.allowPrivate);
    if (!target.ok) return { ok: false, statusCode: null, error: `refused: the URL ${target.reason}` };
    const now = this.ports.now();
    const body = JSON.stringify({ type: d.type, timestamp: now.toISOString(), data: job });
    const headers = signedHeaders(secret, d.id, Math.floor(now.getTime() / 1000), body);
    return this.ports.post(target.url, target.address, target.family, headers, body, this.settings.timeoutMs);
  }
}
