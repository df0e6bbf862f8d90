/**
 * The Batch API's request parameters, one parser per request as OpenAI's API reference defines
 * them; any other field is 400 naming it (openai-api.ts's way). Pure.
 */
import { FieldError } from "../../../lib/errors";
import { unknownFieldsOf } from "../../../lib/known-fields";
import { objectBody, refusal } from "../openai-api";
import { parseWebhookUrl } from "../../gpu-scheduler/webhooks/webhook-target";
import { BATCH_ENDPOINTS, BatchEndpoint } from "./batch-input";
import type { Page } from "./files.repository";

type Body = Record<string, unknown>;
const ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_METADATA_KEYS = 16;

function check<T>(raw: unknown, known: string[], read: (body: Body, errors: FieldError[]) => T): T {
  const body = objectBody(raw ?? {});
  const errors = unknownFieldsOf(body, new Set(known));
  const unknown = errors.length;
  const value = read(body, errors);
  if (errors.length) throw refusal(errors, unknown);
  return value;
}

function idOf(body: Body, field: string, errors: FieldError[]): string {
  if (typeof body[field] === "string" && ID.test(body[field])) return body[field];
  errors.push({ field, message: "must be an id of 1 to 64 letters, digits, - or _" });
  return "";
}

/** GET /v1/files/:id, /v1/batches/:id, … */
export const parseIdParams = (raw: unknown) => check(raw, ["id"], (b, e) => idOf(b, "id", e));

/** OpenAI's list parameters: `after`, `limit` (1 to `max`), `order` (files only), `purpose` (files only). */
export function parseListParams(raw: unknown, opts: { max: number; fallback: number; files: boolean }): Page & { purpose?: string } {
  const known = opts.files ? ["after", "limit", "order", "purpose"] : ["after", "limit"];
  return check(raw, known, (b, errors) => {
    const after = b.after === undefined ? undefined : idOf(b, "after", errors);
    // The query string carries text: "20" is 20.
    const limit = b.limit === undefined ? opts.fallback : Number(b.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > opts.max) errors.push({ field: "limit", message: `must be an integer from 1 to ${opts.max}` });
    const order = b.order ?? "desc";
    if (order !== "asc" && order !== "desc") errors.push({ field: "order", message: 'must be "asc" or "desc"' });
    if (b.purpose !== undefined && b.purpose !== "batch" && b.purpose !== "batch_output")
      errors.push({ field: "purpose", message: 'must be "batch" or "batch_output"' });
    return { after, limit, order: order as Page["order"], purpose: b.purpose as string | undefined };
  });
}

export type BatchCreate = { inputFileId: string; endpoint: BatchEndpoint; metadata: Record<string, string> | null };

function metadataOf(v: unknown, errors: FieldError[]): Record<string, string> | null {
  if (v === undefined || v === null) return null;
  const ok =
    typeof v === "object" &&
    !Array.isArray(v) &&
    Object.keys(v).length <= MAX_METADATA_KEYS &&
    Object.entries(v).every(([k, s]) => k.length <= 64 && typeof s === "string" && s.length <= 512);
  if (!ok) {
    errors.push({ field: "metadata", message: `must be an object of at most ${MAX_METADATA_KEYS} string values (keys ≤ 64, values ≤ 512 characters)` });
    return null;
  }
  const metadata = v as Record<string, string>;
  if (metadata.webhookUrl !== undefined) {
    const url = parseWebhookUrl(metadata.webhookUrl);
    if (!url.ok) errors.push({ field: "metadata.webhookUrl", message: url.reason });
  }
  return metadata;
}

/** POST /v1/batches. */
export const parseBatchCreate = (raw: unknown): BatchCreate =>
  check(raw, ["input_file_id", "endpoint", "completion_window", "metadata"], (b, errors) => {
    const inputFileId = idOf(b, "input_file_id", errors);
    if (!(BATCH_ENDPOINTS as readonly unknown[]).includes(b.endpoint))
      errors.push({ field: "endpoint", message: `must be one of ${BATCH_ENDPOINTS.join(", ")}` });
    if (b.completion_window !== "24h") errors.push({ field: "completion_window", message: 'must be "24h"' });
    return { inputFileId, endpoint: b.endpoint as BatchEndpoint, metadata: metadataOf(b.metadata, errors) };
  });

/** The cursor of GET /v1/batches/:id/events' next page: the batch, and the status of the last event sent. */
export type BatchEventsCursor = { id: string; last: string };

export const parseEventsCursor = (raw: unknown): BatchEventsCursor =>
  check(raw, ["id", "last"], (b, errors) => {
    const id = idOf(b, "id", errors);
    if (typeof b.last !== "string" || b.last.length > 32) errors.push({ field: "last", message: "must be a batch status" });
    return { id, last: b.last as string };
  });
