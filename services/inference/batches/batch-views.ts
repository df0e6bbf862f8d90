/**
 * The Batch API's objects as OpenAI's API reference writes them (`file`, `batch`, cursor pages,
 * the lines of output and error files): times in Unix seconds, absent ones null. Pure.
 */
import { openAiError } from "../../../lib/openai-errors";
import type { BatchRow } from "./batches.repository";
import type { FileRow } from "./files.repository";

const seconds = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

export function fileObject(f: FileRow) {
  return {
    id: f.id,
    object: "file" as const,
    bytes: Number(f.bytes),
    created_at: seconds(f.created_at),
    filename: f.filename,
    purpose: f.purpose,
    status: "processed" as const,
    expires_at: null,
    status_details: null,
  };
}

export function batchObject(b: BatchRow) {
  return {
    id: b.id,
    object: "batch" as const,
    endpoint: b.endpoint,
    errors: b.errors ? { object: "list", data: b.errors } : null,
    input_file_id: b.input_file_id,
    completion_window: b.completion_window,
    status: b.status,
    output_file_id: b.output_file_id,
    error_file_id: b.error_file_id,
    created_at: seconds(b.created_at),
    in_progress_at: seconds(b.in_progress_at),
    expires_at: seconds(b.expires_at),
    finalizing_at: seconds(b.finalizing_at),
    completed_at: seconds(b.completed_at),
    failed_at: seconds(b.failed_at),
    expired_at: seconds(b.expired_at),
    cancelling_at: seconds(b.cancelling_at),
    cancelled_at: seconds(b.cancelled_at),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
  };
}

/** OpenAI's cursor page from `rows` (one more than `limit` when there are more). */
export function cursorPage<R extends { id: string }, T>(rows: R[], limit: number, view: (r: R) => T) {
  const page = rows.slice(0, limit);
  return {
    object: "list" as const,
    data: page.map(view),
    first_id: page[0]?.id ?? null,
    last_id: page[page.length - 1]?.id ?? null,
    has_more: rows.length > limit,
  };
}

/** A line of the output file: the route's answer, as the route would have sent it. */
export const answeredLine = (id: string, customId: string, requestId: string, body: unknown) => ({
  id,
  custom_id: customId,
  response: { status_code: 200, request_id: requestId, body },
  error: null,
});

/** A line of the error file for a request the route refused: its status and OpenAI's error body. */
export function refusedLine(id: string, customId: string, requestId: string, err: { code: string; status: number; message: string; details: unknown }) {
  return {
    id,
    custom_id: customId,
    response: { status_code: err.status, request_id: requestId, body: openAiError(err.status, err.code, err.message, err.details) },
    error: null,
  };
}

/** A line of the error file for a request that never ran (the batch expired, the monthly quota ran out). */
export const unrunLine = (id: string, customId: string, code: "batch_expired" | "insufficient_quota", message: string) => ({
  id,
  custom_id: customId,
  response: null,
  error: { code, message },
});
