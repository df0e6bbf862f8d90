/**
 * The platform's errors in Anthropic's shape, for the Messages API (/v1/messages): `{"type":
 * "error", "error": {"type", "message"}, "request_id"}` with Anthropic's statuses. The platform's
 * own status picks the type; the statuses Anthropic's API does not use become its nearest ones
 * (a provider's failure 500 api_error, the platform or a provider unavailable 529
 * overloaded_error). A validation error's message names its fields (`field: message; …`).
 */
export type AnthropicErrorBody = { type: "error"; error: { type: string; message: string }; request_id: string | null };

/** Anthropic's error type of each status it answers with. */
const TYPES: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

/** The platform's statuses Anthropic's API does not answer with, as the ones it does. */
const STATUSES: Readonly<Record<number, number>> = { 502: 500, 503: 529 };

const fieldsOf = (details: unknown): string[] =>
  Array.isArray(details)
    ? details.flatMap((d: { field?: unknown; message?: unknown }) =>
        typeof d?.field === "string" && d.field ? [`${d.field}: ${String(d.message ?? "is invalid")}`] : [],
      )
    : [];

/** The status to answer with and the body, for a platform error of `status` and `code` (its catalogue word). */
export function anthropicError(
  status: number,
  message: string,
  details: unknown,
  requestId: string | null = null,
): { status: number; body: AnthropicErrorBody } {
  const answered = STATUSES[status] ?? status;
  const type = TYPES[answered] ?? (answered >= 500 ? "api_error" : "invalid_request_error");
  const fields = fieldsOf(details);
  return { status: answered, body: { type: "error", error: { type, message: fields.length ? fields.join("; ") : message }, request_id: requestId } };
}
