/**
 * Per-account inference limits: requests and tokens per minute (fixed one-minute windows, shared
 * by every replica through Redis). A request is counted when it arrives and refused over the
 * requests limit; tokens are counted when an answer finished (only then are they known) and a new
 * request is refused while the window's tokens are already at the limit. The answer carries
 * OpenAI's x-ratelimit-* headers. Limits come from one small interface: the usage service's
 * per-account overrides over the environment's defaults (UsageInferenceLimits).
 */
import { apiError } from "../../lib/errors";
import type { QuotaGate, Standing } from "../../lib/quota-gate";
import { isUuid } from "../../lib/uuid";
import type { Counted, RateLimiter } from "../../lib/rate-limiter";

export type InferenceLimit = {
  /** INFERENCE_RPM or the account's `requestsPerMinute`; null: unlimited. */
  requestsPerMinute: number | null;
  /** INFERENCE_TPM or the account's `tokensPerMinute`; null: unlimited. */
  tokensPerMinute: number | null;
};

export interface InferenceLimits {
  /** `standing`: the account's, when the caller just read it from the same gate (not asked again). */
  limitFor(clientId: string, standing?: Standing): Promise<InferenceLimit>;
}

/**
 * Limits from the usage service (an account's `requestsPerMinute` / `tokensPerMinute` override,
 * else the default usage computes), through the QuotaGate's cache that the quota check fills
 * anyway: an admin's change reaches every replica within QUOTA_CACHE_MS. An account the gate knows
 * nothing of (no usage service, or down with nothing cached) gets the environment's defaults.
 */
export class UsageInferenceLimits implements InferenceLimits {
  constructor(
    private readonly gate: Pick<QuotaGate, "standings">,
    private readonly defaults: InferenceLimit,
  ) {}

  async limitFor(clientId: string, known?: Standing): Promise<InferenceLimit> {
    const standing = isUuid(clientId) ? (known ?? (await this.gate.standings([clientId])).get(clientId)) : undefined;
    if (!standing) return this.defaults;
    const { requestsPerMinute, tokensPerMinute } = standing.limits;
    return { requestsPerMinute, tokensPerMinute };
  }
}

const WINDOW_S = 60;

/** OpenAI's headers for one counter; `count` is what the window holds now. */
function headersOf(kind: "requests" | "tokens", limit: number, decision: Counted): Record<string, string> {
  return {
    [`x-ratelimit-limit-${kind}`]: String(limit),
    [`x-ratelimit-remaining-${kind}`]: String(Math.max(0, limit - decision.count)),
    [`x-ratelimit-reset-${kind}`]: `${decision.retryAfterS}s`,
  };
}

export class InferenceRateLimits {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: InferenceLimits,
  ) {}

  /**
   * Counts one request; resolves with the headers for the answer, or throws 429 RATE_LIMITED
   * (details: `retryAfter`, which `limit` was hit, and the headers) when over either limit.
   * `standing`: the account's as the quota check just read it (the gate is not asked twice).
   */
  async admit(clientId: string, standing?: Standing): Promise<Record<string, string>> {
    const { requestsPerMinute: rpm, tokensPerMinute: tpm } = await this.limits.limitFor(clientId, standing);
    if (rpm === null && tpm === null) return {};
    const [requests, tokens] = await Promise.all([
      rpm === null ? undefined : this.limiter.hit(`rpm:${clientId}`, rpm, WINDOW_S),
      tpm === null ? undefined : this.limiter.peek(`tpm:${clientId}`, tpm),
    ]);
    const headers = { ...(requests && headersOf("requests", rpm!, requests)), ...(tokens && headersOf("tokens", tpm!, tokens)) };
    const refused: Array<["requests" | "tokens", Counted]> = [];
    if (requests && !requests.allowed) refused.push(["requests", requests]);
    if (tokens && !tokens.allowed) refused.push(["tokens", tokens]);
    if (!refused.length) return headers;
    const retryAfter = Math.max(...refused.map(([, d]) => d.retryAfterS));
    const limit = refused[0][0];
    throw apiError("RATE_LIMITED", `Rate limit of ${limit} per minute reached, retry in ${retryAfter} s`, { retryAfter, limit, headers });
  }

  /** Counts an answer's tokens against the account's window (off the response path). */
  async charge(clientId: string, tokens: number): Promise<void> {
    if (tokens <= 0) return;
    const { tokensPerMinute: tpm } = await this.limits.limitFor(clientId);
    if (tpm !== null) await this.limiter.hit(`tpm:${clientId}`, tpm, WINDOW_S, tokens);
  }
}
