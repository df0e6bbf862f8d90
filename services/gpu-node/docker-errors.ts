/** What the Docker engine's failures may tell: its own words (bounded, host details masked) and the few fixed reasons a client reads. */

type DockerError = Error & { statusCode?: number; code?: string; json?: { message?: string } | null };

const ADDRESS = /\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b/g;

/**
 * The engine's own explanation, on one line and bounded, without what describes the host: IP
 * addresses are masked, and a socket-level failure only says the engine did not answer.
 */
export function dockerMessage(err: unknown): string {
  const e = err as DockerError;
  if (e?.statusCode === undefined && typeof e?.code === "string") return "the container engine did not answer";
  const raw = (typeof e?.json?.message === "string" && e.json.message) || e?.message || String(err);
  const line = raw
    .replace(/^\(HTTP code \d+\)\s*[a-z ]*-\s*/i, "")
    .replace(ADDRESS, "<address>")
    .replace(/\s+/g, " ")
    .trim();
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}

/**
 * Why a pull failed, as one of a few fixed sentences: the engine's own text can carry what a
 * registry host answered (a NATS banner, once) and never reaches a client; the node logs it.
 */
export function pullFailureReason(err: unknown): string {
  const message = dockerMessage(err);
  if (/manifest unknown|not found|does not exist|pull access denied|unauthorized|authentication required|denied/i.test(message))
    return "the image does not exist in its registry, or the registry requires credentials";
  if (/no such host|dial tcp|connection refused|timeout|unreachable|TLS|x509|did not answer/i.test(message)) return "its registry could not be reached";
  return "its registry did not serve it";
}

export const statusOf = (err: unknown) => (err as DockerError)?.statusCode;

/** A catch handler that lets the given HTTP statuses pass (already stopped, already gone, …) and rethrows the rest. */
export function ignoreStatus(...codes: number[]) {
  return (err: unknown) => {
    if (!codes.includes(statusOf(err) ?? 0)) throw err;
  };
}
