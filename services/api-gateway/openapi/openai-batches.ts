/**
 * The Batch API under /v1 in OpenAI's shapes (node_modules/openai resources/files, batches):
 * files (multipart upload of a JSONL, purpose "batch"), batches, their cursor pages
 * (`after`, `limit`: `first_id`, `last_id`, `has_more`). services/inference/batches writes them.
 */
import type { Operation } from "./responses";
import { object, text } from "./shapes";
import type { JsonSchema } from "./schema";

const seconds = (description: string): JsonSchema => ({ type: ["integer", "null"], description: `${description} (Unix seconds)` });

const FileObject = object(
  ["id", "object", "bytes", "created_at", "filename", "purpose", "status"],
  {
    id: { type: "string" },
    object: { const: "file" },
    bytes: { type: "integer" },
    created_at: { type: "integer" },
    filename: { type: "string" },
    purpose: { type: "string", enum: ["batch", "batch_output"] },
    status: { const: "processed" },
    expires_at: { type: "null" },
    status_details: { type: "null" },
  },
  { $id: "OpenAiFile" },
);

const BATCH_STATUSES = ["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"];

const Batch = object(
  ["id", "object", "endpoint", "input_file_id", "completion_window", "status", "created_at", "request_counts"],
  {
    id: { type: "string" },
    object: { const: "batch" },
    endpoint: { type: "string", enum: ["/v1/chat/completions", "/v1/embeddings"] },
    errors: {
      oneOf: [
        { type: "null" },
        object(["object", "data"], {
          object: { const: "list" },
          data: { type: "array", items: object(["code", "message"], { code: { type: "string" }, message: { type: "string" }, line: {}, param: {} }) },
        }),
      ],
    },
    input_file_id: { type: "string" },
    completion_window: { const: "24h" },
    status: { type: "string", enum: BATCH_STATUSES },
    output_file_id: { type: ["string", "null"], description: "The answered lines: `{id, custom_id, response: {status_code, request_id, body}, error}`" },
    error_file_id: {
      type: ["string", "null"],
      description: "The failed lines, each with its response (status_code ≥ 400) or error (batch_expired, insufficient_quota)",
    },
    created_at: { type: "integer" },
    in_progress_at: seconds("Lines copied, running"),
    expires_at: seconds("The end of the completion window"),
    finalizing_at: seconds("Every line finished"),
    completed_at: seconds("Output written"),
    failed_at: seconds("Failed"),
    expired_at: seconds("Expired"),
    cancelling_at: seconds("Cancel asked"),
    cancelled_at: seconds("Cancelled"),
    request_counts: object(["total", "completed", "failed"], { total: { type: "integer" }, completed: { type: "integer" }, failed: { type: "integer" } }),
    metadata: {
      type: ["object", "null"],
      description: "Up to 16 strings; `webhookUrl`: where the signed batch.completed / batch.failed / batch.expired event goes",
    },
  },
  { $id: "OpenAiBatch" },
);

/** OpenAI's cursor page of `item`s. */
const page = (id: string, item: JsonSchema) =>
  object(
    ["object", "data", "first_id", "last_id", "has_more"],
    {
      object: { const: "list" },
      data: { type: "array", items: item },
      first_id: { type: ["string", "null"] },
      last_id: { type: ["string", "null"] },
      has_more: { type: "boolean" },
    },
    { $id: id },
  );

const FileUpload = object(["file", "purpose"], {
  file: {
    type: "string",
    format: "binary",
    description: 'JSONL: {"custom_id", "method": "POST", "url", "body"} a line; ≤ 50,000 lines, ≤ 100 MiB, custom_id unique',
  },
  purpose: { const: "batch" },
});

const BatchCreate = object(
  ["input_file_id", "endpoint", "completion_window"],
  {
    input_file_id: { type: "string" },
    endpoint: { type: "string", enum: ["/v1/chat/completions", "/v1/embeddings"], description: "Every line's url" },
    completion_window: { const: "24h" },
    metadata: { type: ["object", "null"], additionalProperties: { type: "string", maxLength: 512 }, maxProperties: 16 },
  },
  { $id: "OpenAiBatchCreateRequest", additionalProperties: false },
);

const DEFAULTS = { tag: "openai", status: 200 } as const;
const LIST = "Newest first; query `after` (an id of the list) and `limit`.";

export const BATCH_OPERATIONS: Record<string, Operation> = {
  "POST /v1/files": {
    ...DEFAULTS,
    summary: "Upload a batch input file (OpenAI's Files API)",
    description: "multipart/form-data. A bad line is 400 naming its line (`param`: file); nothing is stored.",
    request: FileUpload,
    requestType: "multipart/form-data",
    response: FileObject,
    errors: ["VALIDATION_FAILED", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE"],
  },
  "GET /v1/files": {
    ...DEFAULTS,
    summary: "The account's files",
    description: `${LIST} Also \`order\` and \`purpose\`.`,
    response: page("OpenAiFilePage", FileObject),
  },
  "GET /v1/files/{id}": { ...DEFAULTS, summary: "A file", response: FileObject, errors: ["NOT_FOUND"] },
  "GET /v1/files/{id}/content": {
    ...DEFAULTS,
    summary: "A file's content (JSONL)",
    contentType: "application/jsonl",
    response: text("The file's lines"),
    errors: ["NOT_FOUND"],
  },
  "DELETE /v1/files/{id}": {
    ...DEFAULTS,
    summary: "Delete a file",
    response: object(["id", "object", "deleted"], { id: { type: "string" }, object: { const: "file" }, deleted: { const: true } }),
    errors: ["NOT_FOUND"],
  },
  "POST /v1/batches": {
    ...DEFAULTS,
    summary: "Create a batch (OpenAI's Batch API): run behind interactive traffic at BATCH_CREDIT_FACTOR of the price",
    request: BatchCreate,
    response: Batch,
    errors: ["VALIDATION_FAILED", "NOT_FOUND"],
  },
  "GET /v1/batches": { ...DEFAULTS, summary: "The account's batches", description: LIST, response: page("OpenAiBatchPage", Batch) },
  "GET /v1/batches/{id}": { ...DEFAULTS, summary: "A batch", response: Batch, errors: ["NOT_FOUND"] },
  "GET /v1/batches/{id}/events": {
    ...DEFAULTS,
    summary: "A batch's status changes as server-sent events (an addition to OpenAI's API)",
    description:
      "`event: status` with the batch object: its current state first, then one per change; a `: keep-alive` comment every 15 s; the stream ends with the batch (completed, failed, expired or cancelled).",
    contentType: "text/event-stream",
    response: text("Server-sent events, each `data:` the batch object"),
    errors: ["NOT_FOUND"],
  },
  "POST /v1/batches/{id}/cancel": {
    ...DEFAULTS,
    summary: "Cancel a batch (lines not started are not run; what finished is kept)",
    response: Batch,
    errors: ["NOT_FOUND", "INVALID_STATE"],
  },
};
