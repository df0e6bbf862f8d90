/**
 * GET /v1/batches/:id/events: a batch's status as server-sent events, as GET
 * /api/gpu/jobs/:id/events gives a job's (API-DECISIONS "GPU jobs: live output and events"; the
 * contract names no stream for batches, docs/inference.md says why this one): the batch object
 * now as the first `event: status`, then one per status change, a `: keep-alive` comment every
 * 15 s, and the end after a terminal status. A live paged body (lib/paged-body.ts): each page call
 * reads the batch row (any replica serves any page), waiting between reads for this replica's
 * runner to move a batch (woken) or BATCH_POLL_MS at most. Another account's batch is 404.
 */
import type { Context } from "moleculer";
import { notFound } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { BodyPage, PagedBodyMeta } from "../../../lib/paged-body";
import { StatusWatch } from "../../gpu-scheduler/streams/job-watch";
import { BatchEventsCursor, parseEventsCursor, parseIdParams } from "./batch-params";
import { batchObject } from "./batch-views";
import type { BatchesRepository, BatchRow, BatchStatus } from "./batches.repository";

export const KEEP_ALIVE_MS = 15_000;
const ENDED: readonly BatchStatus[] = ["completed", "failed", "expired", "cancelled"];
/** Every watcher waits on this key: a batch moved in this replica wakes them all to read theirs again. */
const ANY = "*";

export type EventsPorts = { batches: BatchesRepository; watch: StatusWatch; pollMs: number; keepAliveMs: number };
type Meta = CallerMeta & PagedBodyMeta & { $responseType?: string; $responseHeaders?: Record<string, string> };

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

function statusEvent(batch: BatchRow): BodyPage {
  const data = b64(`event: status\ndata: ${JSON.stringify(batchObject(batch))}\n\n`);
  return { data, next: ENDED.includes(batch.status) ? null : { id: batch.id, last: batch.status } };
}

async function ownBatch(ports: EventsPorts, clientId: string, id: string): Promise<BatchRow> {
  const batch = await ports.batches.get(clientId, id);
  if (!batch) throw notFound("Batch");
  return batch;
}

/** The first page: the batch now; the next ones from inference.v1BatchesEventsPage. */
export async function batchEvents(ports: EventsPorts, ctx: Context<unknown, Meta>): Promise<BodyPage> {
  const batch = await ownBatch(ports, ctx.meta.caller!.clientId, parseIdParams(ctx.params));
  ctx.meta.$responseType = "text/event-stream; charset=utf-8";
  ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, "Cache-Control": "no-cache", "X-Accel-Buffering": "no" };
  ctx.meta.$pagedBody = { action: "inference.v1BatchesEventsPage" };
  return statusEvent(batch);
}

/** The next event, once the batch's status differs from the last sent; a keep-alive comment after keepAliveMs. */
export async function nextBatchEvent(ports: EventsPorts, ctx: Context<unknown, Meta>): Promise<BodyPage> {
  const cursor: BatchEventsCursor = parseEventsCursor(ctx.params);
  const deadline = Date.now() + ports.keepAliveMs;
  for (;;) {
    const left = deadline - Date.now();
    // Subscribed before reading: a move between the read and the wait still wakes it.
    const waiting = ports.watch.wait(ANY, Math.max(0, Math.min(ports.pollMs, left)));
    try {
      const batch = await ownBatch(ports, ctx.meta.caller!.clientId, cursor.id);
      if (batch.status !== cursor.last) return statusEvent(batch);
      if (left <= 0) return { data: b64(": keep-alive\n\n"), next: { ...cursor } };
      await waiting.changed;
    } finally {
      waiting.cancel();
    }
  }
}

/** Wakes this replica's event streams: a batch may have moved. */
export const batchesMoved = (watch: StatusWatch) => watch.notify(ANY);

export { StatusWatch };
