/**
 * The error catalogue: every error a client can see is built here, so `code` words (stable
 * UPPER_SNAKE machine words clients code against) and statuses stay the same across services.
 */
import { Errors } from "moleculer";

const { MoleculerClientError, MoleculerError } = Errors;

export type FieldError = { field: string; message: string };

export const ErrorCodes = {
  VALIDATION_FAILED: 400,
  INVALID_JSON: 400,
  /** Not HTTP the server can parse (answered on the connection, before any route). */
  MALFORMED_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  QUOTA_EXCEEDED: 403,
  NOT_FOUND: 404,
  MODEL_NOT_FOUND: 404,
  EMAIL_TAKEN: 409,
  INVALID_STATE: 409,
  /** A name the account already uses for a resource of that kind (a model deployment), or a provider's model's. */
  NAME_TAKEN: 409,
  /** Headers or body not received within the gateway's time limits (slow or stalled client). */
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  /** An `Expect` header other than 100-continue. */
  EXPECTATION_FAILED: 417,
  /** An `Idempotency-Key` sent again with a different request body. */
  IDEMPOTENCY_KEY_REUSED: 422,
  /** A point-in-time restore to a moment outside the source database's restore window. */
  OUT_OF_RESTORE_WINDOW: 422,
  RATE_LIMITED: 429,
  /** Request headers over the server's limit (Node's 16 KiB by default). */
  HEADERS_TOO_LARGE: 431,
  INTERNAL: 500,
  PROVIDER_ERROR: 502,
  SERVICE_UNAVAILABLE: 503,
  PROVIDER_TIMEOUT: 504,
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** A client-facing error; `details` reaches the client as is. */
export function apiError(code: ErrorCode, message: string, details: unknown = null) {
  const status = ErrorCodes[code];
  return status < 500 ? new MoleculerClientError(message, status, code, details) : new MoleculerError(message, status, code, details);
}

export const validationFailed = (details: FieldError[], message = "Request validation failed") => apiError("VALIDATION_FAILED", message, details);
export const notFound = (what: string) => apiError("NOT_FOUND", `${what} not found`);
export const unauthorized = (message = "Missing or invalid credentials") => apiError("UNAUTHORIZED", message);
export const forbidden = (message: string) => apiError("FORBIDDEN", message);
export const rateLimited = (retryAfterS: number) => apiError("RATE_LIMITED", "Too many requests, retry later", { retryAfter: retryAfterS });

/** Whether PostgreSQL refused the data itself (SQLSTATE class 22), not the request or the server. */
export function isDataError(err: unknown): boolean {
  const sqlState = (err as { code?: unknown } | null)?.code;
  return typeof sqlState === "string" && /^22[0-9A-Z]{3}$/.test(sqlState);
}

/**
 * A PostgreSQL error caused by the data itself (SQLSTATE class 22: a NUL byte, a bad encoding,
 * a value out of range) becomes 400 naming nothing internal; any other error is returned as is.
 */
export function fromDataError(err: unknown): unknown {
  if (isDataError(err)) return validationFailed([{ field: "(request)", message: "The request holds a value that cannot be stored." }]);
  return err;
}
