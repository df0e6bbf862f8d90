/**
 * A thin fetch wrapper typed by the generated `paths` (what openapi-fetch does, kept to what the
 * SDK needs until that package is installed): path and query parameters and the body are checked
 * against the document, the success body is the document's type, any other status throws ApiError.
 */
import type { paths } from "./generated/schema";

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

/** Any non-2xx answer, in the contract's error shape `{ error: { code, message, details } }`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown = null,
  ) {
    super(message);
    this.name = "ApiError";
  }

  static async from(res: Response): Promise<ApiError> {
    const text = await res.text().catch(() => "");
    try {
      const { error } = JSON.parse(text) as { error: { code: string; message: string; details?: unknown } };
      return new ApiError(res.status, error.code, error.message, error.details ?? null);
    } catch {
      return new ApiError(res.status, "HTTP_ERROR", `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`);
    }
  }
}

export type Credentials = { baseUrl: string; token?: string; fetch?: typeof fetch };

export type RawInit = { path?: Record<string, string | number>; query?: Record<string, unknown>; body?: unknown; signal?: AbortSignal; accept?: string };

/** Builds `/api/gpu/jobs/{id}` → `/api/gpu/jobs/5b0e…?x=1` (each value encoded). */
export function buildUrl(baseUrl: string, template: string, init: RawInit = {}): string {
  const filled = template.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => {
    const value = init.path?.[name];
    if (value === undefined) throw new TypeError(`Missing path parameter ${name} for ${template}`);
    return encodeURIComponent(String(value));
  });
  const url = new URL(filled, baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`);
  for (const [key, value] of Object.entries(init.query ?? {})) if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  return url.toString();
}

/** The raw response of a 2xx answer (streams, archives); throws ApiError otherwise. */
export async function send(creds: Credentials, method: Method, template: string, init: RawInit = {}): Promise<Response> {
  const headers: Record<string, string> = { accept: init.accept ?? "application/json" };
  if (creds.token) headers.authorization = `Bearer ${creds.token}`;
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const res = await (creds.fetch ?? fetch)(buildUrl(creds.baseUrl, template, init), {
    method: method.toUpperCase(),
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
  });
  if (!res.ok) throw await ApiError.from(res);
  return res;
}

/** A typed JSON call: `request(creds, "get", "/api/gpu/jobs/{id}", { path: { id } })`. */
export async function request<M extends Method, P extends PathsWith<M>>(
  creds: Credentials,
  method: M,
  template: P,
  init: RequestInit<P, M> & { signal?: AbortSignal },
): Promise<ResponseOf<P, M>> {
  const res = await send(creds, method, template, init as RawInit);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as ResponseOf<P, M>;
}
