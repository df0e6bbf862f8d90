/**
 * Turns any error that reaches the gateway into the one public error shape, whatever service
 * raised it: `{ error: { code, message, details } }` (details: null or structured, for validation
 * a list of `{ field, message }`). Nothing internal (stack, SQL, node or service names)
 * passes: unknown errors become 500 INTERNAL carrying only the request id.
 */
import { ErrorCode, ErrorCodes } from "../../lib/errors";

export type PublicError = {
  status: number;
  body: { error: { code: string; message: string; details: unknown } };
  headers: Record<string, string>;
  /** True when the error was unexpected and must be logged. */
  internal: boolean;
};

type AnyError = {
  name?: string;
  message?: string;
  code?: unknown;
  status?: unknown;
  type?: unknown;
  data?: unknown;
};

const BY_STATUS: Record<number, ErrorCode> = {
  400: "VALIDATION_FAILED",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  409: "INVALID_STATE",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "RATE_LIMITED",
};

const BODY_PARSER_ERRORS: Record<string, [ErrorCode, string]> = {
  "entity.too.large": ["PAYLOAD_TOO_LARGE", "Request body is larger than 1 MiB"],
  "entity.parse.failed": ["INVALID_JSON", "Request body is not valid JSON"],
  "encoding.unsupported": ["UNSUPPORTED_MEDIA_TYPE", "Unsupported content encoding"],
  "charset.unsupported": ["UNSUPPORTED_MEDIA_TYPE", "Unsupported charset"],
  "request.aborted": ["INVALID_JSON", "Request body was aborted"],
  "request.size.invalid": ["INVALID_JSON", "Request body size does not match Content-Length"],
  "entity.invalid.utf8": ["INVALID_JSON", "Request body is not valid UTF-8"],
};

function make(code: ErrorCode, message: string, details: unknown = null, internal = false): PublicError {
  return { status: ErrorCodes[code], body: { error: { code, message, details } }, headers: {}, internal };
}

/** fastest-validator's entries → `{ field, message }`. */
function validationDetails(data: unknown): { field: string; message: string }[] {
  if (!Array.isArray(data)) return [];
  return data.map((d: { field?: string; message?: string; type?: string }) => ({
    field: String(d.field ?? ""),
    message: String(d.message ?? d.type ?? "is invalid"),
  }));
}

export function toPublicError(raw: unknown, requestId: string): PublicError {
  const err = (raw ?? {}) as AnyError;
  const type = typeof err.type === "string" ? err.type : "";
  const status = typeof err.code === "number" ? err.code : typeof err.status === "number" ? err.status : 500;

  if (BODY_PARSER_ERRORS[type]) {
    const [code, message] = BODY_PARSER_ERRORS[type];
    return make(code, message);
  }
  // zlib's errors (a Content-Encoding the body does not match), which moleculer-web re-wraps as 500s.
  if (typeof err.code === "string" && /^Z_[A-Z_]+$/.test(err.code)) {
    return make("INVALID_JSON", "Request body does not match its Content-Encoding");
  }
  if (err.name === "ValidationError" && type === "VALIDATION_ERROR") {
    return make("VALIDATION_FAILED", "Request validation failed", validationDetails(err.data));
  }
  // moleculer-web's own errors
  if (type === "NOT_FOUND" && err.name === "NotFoundError") return make("NOT_FOUND", "Route not found");
  if (type === "NO_TOKEN" || type === "INVALID_TOKEN") return make("UNAUTHORIZED", "Missing or invalid credentials");
  if (
    err.name === "ServiceNotFoundError" ||
    err.name === "ServiceNotAvailableError" ||
    err.name === "ServiceUnavailableError" ||
    err.name === "RequestTimeoutError" ||
    err.name === "RequestRejectedError" ||
    err.name === "BrokerDisconnectedError"
  ) {
    return make("SERVICE_UNAVAILABLE", "Service temporarily unavailable, retry later");
  }

  // Errors raised through lib/errors.ts carry a catalogue code as their type.
  if (type in ErrorCodes && ErrorCodes[type as ErrorCode] === status) {
    const pub = make(type as ErrorCode, err.message || type, err.data ?? null);
    // Too many requests, or a service shedding load (auth's password hashes): when to come back.
    if (type === "RATE_LIMITED" || type === "SERVICE_UNAVAILABLE") {
      const { retryAfter, headers, ...rest } = (err.data ?? {}) as { retryAfter?: number; headers?: unknown };
      if (typeof retryAfter === "number") pub.headers["Retry-After"] = String(Math.max(1, Math.ceil(retryAfter)));
      // OpenAI's x-ratelimit-* headers travel in the error's data: they become headers, not details.
      if (headers && typeof headers === "object") {
        for (const [name, value] of Object.entries(headers)) if (/^x-ratelimit-[a-z-]+$/.test(name)) pub.headers[name] = String(value);
        pub.body.error.details = { retryAfter, ...rest };
      }
    }
    return pub;
  }
  // Another client error (4xx) from a library: keep its status, use the catalogue word.
  if (status >= 400 && status < 500 && BY_STATUS[status]) {
    return make(BY_STATUS[status], err.message || "Bad request");
  }
  return make("INTERNAL", "Internal error", { requestId }, true);
}
