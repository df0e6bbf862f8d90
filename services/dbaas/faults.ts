/**
 * How dbaas tells faults apart: a server that is down or unreachable (503 to the client), a
 * transient refusal worth retrying, and everything else (a bug: 500).
 */
import { Errors } from "moleculer";
import { apiError } from "../../lib/errors";

type PgLikeError = { code?: unknown; message?: unknown };

const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "EHOSTUNREACH", "EPIPE", "EAI_AGAIN"]);
// admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300"]);
// object_in_use (template busy), serialization_failure, deadlock_detected, lock_not_available
const RETRYABLE_SQLSTATES = new Set(["55006", "40001", "40P01", "55P03"]);
const UNAVAILABLE_MESSAGES = [/Connection terminated/i, /timeout exceeded when trying to connect/i, /Client has encountered a connection error/i];

function codeOf(err: unknown): string {
  const code = (err as PgLikeError | null)?.code;
  return typeof code === "string" ? code : "";
}

/** The server is down, unreachable, restarting or out of connections. */
export function isUnavailable(err: unknown): boolean {
  const code = codeOf(err);
  if (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith("08")) return true;
  const message = (err as PgLikeError | null)?.message;
  return typeof message === "string" && UNAVAILABLE_MESSAGES.some((re) => re.test(message));
}

export function isTransient(err: unknown): boolean {
  return isUnavailable(err) || RETRYABLE_SQLSTATES.has(codeOf(err));
}

export const isDuplicate = (err: unknown): boolean => ["42710", "42P04", "23505"].includes(codeOf(err));

export type Sleep = (ms: number) => Promise<void>;
export const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `work` again on transient faults, with exponential backoff; `attempt` starts at 1. */
export async function retryTransient<T>(
  work: (attempt: number) => Promise<T>,
  { attempts = 4, baseDelayMs = 50, sleep = realSleep }: { attempts?: number; baseDelayMs?: number; sleep?: Sleep } = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (err) {
      if (attempt >= attempts || !isTransient(err)) throw err;
      await sleep(baseDelayMs * 2 ** (attempt - 1));
    }
  }
}

export const unavailable = () => apiError("SERVICE_UNAVAILABLE", "Database server unavailable, retry later");

/** What a client sees: our own API errors as they are, a down server as 503, the rest as is (500). */
export function toClientError(err: unknown): unknown {
  if (err instanceof Errors.MoleculerError) return err;
  return isUnavailable(err) ? unavailable() : err;
}
