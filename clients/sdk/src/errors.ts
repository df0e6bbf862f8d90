/**
 * The SDK's errors, one class per kind of failure (as openai-node names them), all under
 * CiPlatformError: `catch (e) { if (e instanceof NotFoundError) … }`.
 */

/** Every error the SDK throws. */
export class CiPlatformError extends Error {
  override name = "CiPlatformError";
}

/** A non-2xx answer, in the contract's error shape `{ error: { code, message, details } }`. */
export class ApiError extends CiPlatformError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown = null,
    /** The answer's `X-Request-Id` (quote it when reporting a problem). */
    readonly requestId: string | null = null,
    readonly headers: Headers | null = null,
  ) {
    super(message);
  }

  /** The ApiError subclass for `res`, its body read as the contract's error shape. */
  static async from(res: Response): Promise<ApiError> {
    const text = await res.text().catch(() => "");
    const requestId = res.headers.get("x-request-id");
    try {
      const { error } = JSON.parse(text) as { error: { code: string; message: string; details?: unknown } };
      return errorFor(res.status, error.code, error.message, error.details ?? null, requestId, res.headers);
    } catch {
      return errorFor(res.status, "HTTP_ERROR", `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`, null, requestId, res.headers);
    }
  }
}

/** 400: the body or parameters break a rule (`details`: a list of `{ field, message }`). */
export class BadRequestError extends ApiError {
  override name = "BadRequestError";
}
/** 401: credentials missing, expired, revoked or wrong. */
export class AuthenticationError extends ApiError {
  override name = "AuthenticationError";
}
/** 403: authenticated but not allowed (a scope, a quota). */
export class PermissionDeniedError extends ApiError {
  override name = "PermissionDeniedError";
}
/** 404: no such resource for this account. */
export class NotFoundError extends ApiError {
  override name = "NotFoundError";
}
/** 409: a duplicate, or a resource in the wrong state. */
export class ConflictError extends ApiError {
  override name = "ConflictError";
}
/** 429: too many requests (retried by the SDK first, as `Retry-After` says). */
export class RateLimitError extends ApiError {
  override name = "RateLimitError";
}
/** 5xx: the platform or a backing service failed. */
export class InternalServerError extends ApiError {
  override name = "InternalServerError";
}

/** No answer at all: the URL is wrong, or the platform is down. */
export class ConnectionError extends CiPlatformError {
  override name = "ConnectionError";
  constructor(
    readonly url: string,
    override readonly cause: unknown,
  ) {
    const code = (cause as { cause?: { code?: string } })?.cause?.code ?? (cause as { code?: string })?.code;
    super(`Could not reach ${url}${code ? ` (${code})` : ""}: is the platform running there, and is the base URL right?`);
  }
}

/** No answer within the request's timeout (`timeoutMs`). */
export class TimeoutError extends CiPlatformError {
  override name = "TimeoutError";
  constructor(
    readonly url: string,
    readonly timeoutMs: number,
  ) {
    super(`No answer from ${url} within ${timeoutMs} ms`);
  }
}

const BY_STATUS: Record<number, typeof ApiError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
};

/** The subclass for a status (ApiError itself for one without its own). */
export function errorFor(
  status: number,
  code: string,
  message: string,
  details: unknown = null,
  requestId: string | null = null,
  headers: Headers | null = null,
): ApiError {
  const Kind = BY_STATUS[status] ?? (status >= 500 ? InternalServerError : ApiError);
  return new Kind(status, code, message, details, requestId, headers);
}
