/**
 * Provider failures → the API's error catalogue (503 down, 502 failed, 504 too slow, 404 model
 * unknown to the provider, 400 naming the field a provider or model cannot honour), and the
 * outcome recorded for usage accounting. A provider's own
 * message reaches the client only scrubbed of URLs and addresses.
 */
import { apiError, ErrorCode, FieldError } from "../../lib/errors";
import { ProviderFailure } from "./providers";

export type Outcome = "ok" | "error" | "aborted" | "timeout";

// A URL ends before trailing punctuation ("…/api/chat": refused).
const URL_LIKE = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]*[^\s"'<>.,:;)]/gi;
const IPV4 = /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g;
const IPV6 = /\[[0-9a-f:]+\](?::\d+)?/gi;
const HOST_PORT = /\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9-]+)*:\d{2,5}\b/gi;
const MAX_MESSAGE = 300;

/** Strips what could reveal where a provider runs (URLs, IPs, host:port), and caps the length. */
export function scrub(message: string): string {
  const cleaned = message.replace(URL_LIKE, "[url]").replace(IPV6, "[address]").replace(IPV4, "[address]").replace(HOST_PORT, "[address]");
  return cleaned.length > MAX_MESSAGE ? `${cleaned.slice(0, MAX_MESSAGE)}…` : cleaned;
}

/** Anything thrown on the provider path, as a failure (a bug in an adapter counts as an error). */
export function asFailure(err: unknown): ProviderFailure {
  return err instanceof ProviderFailure ? err : new ProviderFailure("error", "Model provider answer could not be processed");
}

/** `details`: the provider, or (VALIDATION_FAILED) the field refused, as every 400 names it. */
export type PublicFailure = { code: ErrorCode; message: string; details: Record<string, unknown> | FieldError[] };

export function publicFailure(failure: ProviderFailure, provider: string, model: string, timeoutMs: number): PublicFailure {
  switch (failure.kind) {
    case "unavailable":
      return { code: "SERVICE_UNAVAILABLE", message: `Model provider "${provider}" is unavailable`, details: { provider } };
    case "timeout":
      return { code: "PROVIDER_TIMEOUT", message: `Model provider "${provider}" did not answer within ${timeoutMs} ms`, details: { provider } };
    case "not_found":
      return { code: "MODEL_NOT_FOUND", message: `Model "${model}" not found`, details: { provider } };
    case "aborted":
      return { code: "SERVICE_UNAVAILABLE", message: "Inference aborted", details: { provider } };
    case "unsupported": {
      const message = `Model "${model}" (provider "${provider}") cannot honour \`${failure.param ?? "(request)"}\`: ${scrub(failure.message)}`;
      return { code: "VALIDATION_FAILED", message, details: [{ field: failure.param ?? "(request)", message }] };
    }
    case "error":
      return {
        code: "PROVIDER_ERROR",
        message: scrub(failure.message),
        details: failure.status ? { provider, status: failure.status } : { provider },
      };
  }
}

export const toApiError = (f: PublicFailure) => apiError(f.code, f.message, f.details);

export function outcomeOf(failure: ProviderFailure): Outcome {
  return failure.kind === "timeout" ? "timeout" : failure.kind === "aborted" ? "aborted" : "error";
}
