/**
 * The platform's errors in OpenAI's shape, for the OpenAI-compatible /v1 routes:
 * `{"error": {"message", "type", "param", "code"}}` with the same HTTP status as the platform's
 * own answer. `type` follows OpenAI's words by status, `code` is OpenAI's where one exists
 * (invalid_api_key, model_not_found, rate_limit_exceeded, insufficient_quota), else the platform's
 * code in lowercase; `param` names the first invalid field of a validation error.
 */
export type OpenAiError = { error: { message: string; type: string; param: string | null; code: string | null } };

const OPENAI_CODES: Readonly<Record<string, string>> = {
  UNAUTHORIZED: "invalid_api_key",
  MODEL_NOT_FOUND: "model_not_found",
  RATE_LIMITED: "rate_limit_exceeded",
  QUOTA_EXCEEDED: "insufficient_quota",
};

function typeOf(status: number, code: string, details: unknown): string {
  if (status === 401) return "authentication_error";
  if (code === "QUOTA_EXCEEDED") return "insufficient_quota";
  if (status === 403) return "permission_error";
  // OpenAI says which limit was hit: "requests" or "tokens".
  if (status === 429) return (details as { limit?: unknown } | null)?.limit === "tokens" ? "tokens" : "requests";
  return status >= 500 ? "server_error" : "invalid_request_error";
}

function paramOf(details: unknown): string | null {
  const first = Array.isArray(details) ? (details[0] as { field?: unknown } | undefined) : undefined;
  return typeof first?.field === "string" && first.field ? first.field : null;
}

/**
 * The message: OpenAI's say what was wrong, so a validation failure's generic words give way to
 * its fields' own messages ("tools[0].function.name: must be …; temperature: must be …").
 */
function messageOf(message: string, details: unknown): string {
  if (message !== GENERIC_VALIDATION || !Array.isArray(details)) return message;
  const said = (details as Array<{ field?: unknown; message?: unknown }>)
    .filter((d) => typeof d?.message === "string" && d.message)
    .map((d) => (typeof d.field === "string" && d.field && !String(d.message).includes(d.field) ? `${d.field}: ${d.message}` : String(d.message)));
  return said.length ? said.join("; ") : message;
}

const GENERIC_VALIDATION = "Request validation failed";

export function openAiError(status: number, code: string, message: string, details: unknown): OpenAiError {
  return {
    error: {
      message: messageOf(message, details),
      type: typeOf(status, code, details),
      param: paramOf(details),
      code: OPENAI_CODES[code] ?? code.toLowerCase(),
    },
  };
}
