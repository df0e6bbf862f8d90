/**
 * When to try a request again, and how long to wait first. Pure: the random source is passed in,
 * so the policy is tested as a table.
 */

export type RetryOptions = {
  /** Further tries after the first (default 2; 0 turns retries off). */
  maxRetries?: number;
  /** The first backoff ceiling in ms (default 500), doubled at each try. */
  initialDelayMs?: number;
  /** The largest wait between tries in ms, a `Retry-After` included (default 30 000). */
  maxDelayMs?: number;
};

export const RETRY_DEFAULTS: Required<RetryOptions> = { maxRetries: 2, initialDelayMs: 500, maxDelayMs: 30_000 };

/** Methods that do the same thing when sent twice. */
export const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

/** Statuses worth another try: the request was refused before any work (429, 503), or may be (408, 502, 504). */
const RETRY_ANY = new Set([429, 503]);
const RETRY_IDEMPOTENT = new Set([408, 500, 502, 504]);

/** `status` undefined: no answer came (a network failure or a timeout). */
export function shouldRetry(method: string, idempotent: boolean, status?: number): boolean {
  const safe = idempotent || IDEMPOTENT.has(method.toUpperCase());
  if (status === undefined) return safe;
  return RETRY_ANY.has(status) || (safe && RETRY_IDEMPOTENT.has(status));
}

/** `Retry-After` in ms: seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+(\.\d+)?$/.test(header.trim())) return Math.round(Number(header) * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before try `retry` (0 for the first retry): the server's `Retry-After` when it gave one, otherwise full jitter. */
export function backoffMs(retry: number, opts: Required<RetryOptions>, retryAfter?: number, random: () => number = Math.random): number {
  if (retryAfter !== undefined) return Math.min(retryAfter, opts.maxDelayMs);
  const ceiling = Math.min(opts.maxDelayMs, opts.initialDelayMs * 2 ** retry);
  return Math.round(random() * ceiling);
}
