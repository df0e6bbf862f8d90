/**
 * `Idempotency-Key` on job submission (README "GPU jobs"): the key's rule and the request's
 * fingerprint. Pure; the claim itself is SQL (idempotency.repository.ts).
 */
import { createHash } from "crypto";
import { validationFailed } from "../../../lib/errors";

export const IDEMPOTENCY_HEADER = "Idempotency-Key";
/** Visible ASCII (no space, no control character), 1 to 255 of them. */
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** The key as sent, if any; a malformed one is 400 naming the header (before anything is stored). */
export function checkIdempotencyKey(raw: string | undefined): string | undefined {
  if (raw === undefined || KEY_PATTERN.test(raw)) return raw;
  throw validationFailed([{ field: IDEMPOTENCY_HEADER, message: `The '${IDEMPOTENCY_HEADER}' header must be 1 to 255 visible ASCII characters.` }]);
}

/** JSON with object keys sorted at every level: equal values, whatever the order they were sent in. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** Fingerprint of a request's validated body: the same request again has the same one. */
export const requestHash = (params: unknown): string => createHash("sha256").update(canonicalJson(params)).digest("hex");
