/**
 * A thin fetch wrapper typed by the generated `paths` (what openapi-fetch does, kept to what the
 * SDK needs: no dependency): path and query parameters and the body are checked
 * against the document, the success body is the document's type, any other status throws ApiError.
 */
import { ApiError, CiPlatformError, ConnectionError, TimeoutError } from "./errors";
import type { paths } from "./generated/schema";
import { backoffMs, RETRY_DEFAULTS, retryAfterMs, RetryOptions, shouldRetry } from "./retry";

export type Method = "get" | "post" | "put" | "patch" | "delete";

/** The operation at `P` for `M`, or never when the document has none. */
type Operation<P extends keyof paths, M extends Method> = paths[P][M] extends infer O ? ([O] extends [undefined] ? never : NonNullable<O>) : never;
export type PathsWith<M extends Method> = { [P in keyof paths]: [Operation<P, M>] extends [never] ? never : P }[keyof paths];

type Defined<T> = [T] extends [never] ? false : [T] extends [undefined] ? false : true;
type PathPart<O> = O extends { parameters: { path: infer X } } ? (Defined<X> extends true ? { path: X } : unknown) : unknown;
type QueryPart<O> = O extends { parameters: { query?: infer X } } ? (Defined<X> extends true ? { query?: X } : unknown) : unknown;
type BodyPart<O> = O extends { requestBody: { content: { "application/json": infer B } } }
  ? { body: B }
  : O extends { requestBody?: infer R }
    ? R extends { content: { "application/json": infer B } }
      ? { body?: B }
      : unknown
    : unknown;
export type RequestInit<P extends keyof paths, M extends Method> = PathPart<Operation<P, M>> & QueryPart<Operation<P, M>> & BodyPart<Operation<P, M>>;

type SuccessStatus = 200 | 201 | 202 | 204;
type JsonOf<R> = R extends { content: { "application/json": infer J } } ? J : undefined;
export type ResponseOf<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: infer R } ? { [S in keyof R & SuccessStatus]: JsonOf<R[S]> }[keyof R & SuccessStatus] : never;

export type Credentials = {
  /** The platform's URL; a path prefix (`https://host/ci`, behind a reverse proxy) is kept. */
  baseUrl: string;
  /** A JWT, an API key (`ci_…`) or a restricted token (`cit_…`), sent as `Authorization: Bearer`. */
  token?: string;
  fetch?: typeof fetch;
  /** Per try, until the answer's headers (and its body, for JSON calls); default 60 000 ms. */
  timeoutMs?: number;
} & RetryOptions;

export type RawInit = {
  path?: Record<string, string | number>;
  query?: Record<string, unknown>;
  body?: unknown;
  /** A multipart body instead of JSON (file uploads). */
  form?: FormData;
  signal?: AbortSignal;
  accept?: string;
  headers?: Record<string, string>;
  /** A POST that is safe to send twice (it carries an `Idempotency-Key`): retried like a GET. */
  idempotent?: boolean;
};

/** What any call takes besides its parameters. */
export type CallOptions = Pick<RawInit, "signal" | "headers" | "idempotent">;

export const DEFAULT_TIMEOUT_MS = 60_000;

/** Builds `/api/gpu/jobs/{id}` → `<baseUrl>/api/gpu/jobs/5b0e…?x=1` (each value encoded; the base URL's path kept). */
export function buildUrl(baseUrl: string, template: string, init: RawInit = {}): string {
  const filled = template.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => {
    const value = init.path?.[name];
    if (value === undefined) throw new TypeError(`Missing path parameter ${name} for ${template}`);
    return encodeURIComponent(String(value));
  });
  // Relative to the base's path: "/api/x" against "http://h/ci/" would drop "/ci".
  const url = new URL(filled.replace(/^\/+/, ""), baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`);
  for (const [key, value] of Object.entries(init.query ?? {})) if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  return url.toString();
}

/** One try's abort: the caller's signal or the timeout. */
function tryController(signal: AbortSignal | undefined, timeoutMs: number) {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = () => controller.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  signal?.addEventListener("abort", onAbort, { once: true });
  // The caller's signal stays linked after a success: it still cancels a stream's body.
  const detach = () => signal?.removeEventListener("abort", onAbort);
  return { signal: controller.signal, timedOut: () => timedOut, clearTimer: () => clearTimeout(timer), detach };
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

/**
 * The raw response of a 2xx answer (streams, archives); throws ApiError (its subclass) otherwise.
 * Tries again with backoff and jitter where `shouldRetry` says so; `read` (JSON calls: the body's
 * text) runs inside the try, so the timeout covers it.
 */
export async function send(creds: Credentials, method: Method, template: string, init: RawInit = {}): Promise<Response> {
  return (await attempt(creds, method, template, init, async (res) => res)).value;
}

async function attempt<T>(creds: Credentials, method: Method, template: string, init: RawInit, read: (res: Response) => Promise<T>): Promise<{ value: T }> {
  const url = buildUrl(creds.baseUrl, template, init);
  const headers: Record<string, string> = { accept: init.accept ?? "application/json", ...init.headers };
  if (creds.token) headers.authorization = `Bearer ${creds.token}`;
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const policy = { ...RETRY_DEFAULTS, ...definedOf(creds) };
  const timeoutMs = creds.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const fetchInit = { method: method.toUpperCase(), headers, body: init.form ?? (init.body === undefined ? undefined : JSON.stringify(init.body)) };
  for (let retry = 0; ; retry++) {
    const outcome = await tryOnce(creds.fetch ?? fetch, url, fetchInit, init.signal, timeoutMs, read);
    if ("value" in outcome) return outcome;
    const status = outcome.failure instanceof ApiError ? outcome.failure.status : undefined;
    if (retry >= policy.maxRetries || !shouldRetry(method, !!init.idempotent, status)) throw outcome.failure;
    await sleep(backoffMs(retry, policy, outcome.retryAfter), init.signal);
  }
}

type Outcome<T> = { value: T } | { failure: CiPlatformError; retryAfter?: number };

/** One try: the value, or the failure as the SDK's error (the caller's own abort is rethrown as it is). */
async function tryOnce<T>(
  fetchFn: typeof fetch,
  url: string,
  fetchInit: NonNullable<Parameters<typeof fetch>[1]>,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  read: (res: Response) => Promise<T>,
): Promise<Outcome<T>> {
  const tryAbort = tryController(signal, timeoutMs);
  try {
    const res = await fetchFn(url, { ...fetchInit, signal: tryAbort.signal });
    if (!res.ok) {
      tryAbort.detach();
      return { failure: await ApiError.from(res), retryAfter: retryAfterMs(res.headers.get("retry-after")) };
    }
    // A stream's body outlives the try (`read` returns it): only the wait for its headers is timed.
    return { value: await read(res) };
  } catch (err) {
    tryAbort.detach();
    if (signal?.aborted) throw signal.reason ?? err;
    return { failure: tryAbort.timedOut() ? new TimeoutError(url, timeoutMs) : new ConnectionError(url, err) };
  } finally {
    tryAbort.clearTimer();
  }
}

/** The retry options given (undefined ones left to the defaults). */
function definedOf(opts: RetryOptions): RetryOptions {
  return Object.fromEntries(
    Object.entries({ maxRetries: opts.maxRetries, initialDelayMs: opts.initialDelayMs, maxDelayMs: opts.maxDelayMs }).filter(([, v]) => v !== undefined),
  );
}

/** A typed JSON call: `request(creds, "get", "/api/gpu/jobs/{id}", { path: { id } })`. */
export async function request<M extends Method, P extends PathsWith<M>>(
  creds: Credentials,
  method: M,
  template: P,
  init: RequestInit<P, M> & CallOptions,
): Promise<ResponseOf<P, M>> {
  const text = (await attempt(creds, method, template, init as RawInit, (res) => res.text())).value;
  return (text ? JSON.parse(text) : undefined) as ResponseOf<P, M>;
}
