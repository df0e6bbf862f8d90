/**
 * A batch's status moves, each in one transaction on the batch's locked row (another replica
 * skips it): validating → in_progress (its lines copied from the input file) or failed;
 * in_progress → finalizing once every line finished; finalizing → completed, cancelling →
 * cancelled (once no line runs: what finished is kept) and in_progress past its window → expired
 * (lines left fail with batch_expired), each with its output and error files written and its
 * final counts (the lines each file holds); the counts of running batches are refreshed each tick.
 */
import type { Pool, PoolClient } from "pg";
import { transaction } from "../../../lib/db";
import { checkBatchInput } from "./batch-input";
import { unrunLine } from "./batch-views";
import type { BatchesRepository, BatchRow, BatchStatus } from "./batches.repository";
import type { FilesRepository } from "./files.repository";
import type { LinesRepository } from "./lines.repository";

export type FinalizerPorts = {
  db: Pool;
  batches: BatchesRepository;
  files: FilesRepository;
  lines: LinesRepository;
  newId(): string;
};

/** Batches moved per tick at most: a replica's tick stays short, the next tick takes more. */
const PER_TICK = 5;

const wantsWebhook = (b: BatchRow) => typeof b.metadata?.webhookUrl === "string" && b.metadata.webhookUrl !== "";

/** validating → in_progress (or failed); returns how many moved. */
export async function startBatches(ports: FinalizerPorts): Promise<number> {
  let moved = 0;
  for (; moved < PER_TICK; moved++) {
    const found = await transaction(ports.db, async (client) => {
      const batch = await ports.batches.lockOne(client, ["validating"]);
      if (!batch) return false;
      const content = await ports.files.content(batch.client_id, batch.input_file_id);
      if (!content) {
        const error = { code: "invalid_input_file", message: `File ${batch.input_file_id} no longer exists`, line: null, param: "input_file_id" };
        await ports.batches.failed(client, batch.id, [error], wantsWebhook(batch));
        return true;
      }
      const { lines } = checkBatchInput(content);
      await ports.lines.insert(client, batch.id, batch.client_id, lines);
      await ports.batches.started(client, batch.id, lines.length);
      return true;
    });
    if (!found) break;
  }
  return moved;
}

/** Writes the batch's output and error files and moves it to `status`. */
async function end(ports: FinalizerPorts, client: PoolClient, batch: BatchRow, status: BatchStatus): Promise<void> {
  const fileOf = async (ok: boolean) => {
    const lines = await ports.lines.results(client, batch.id, ok);
    if (!lines.length) return { id: null, lines: 0 };
    const file = await ports.files.insert(
      {
        id: `file-${ports.newId()}`,
        client_id: batch.client_id,
        purpose: "batch_output",
        filename: `${batch.id}_${ok ? "output" : "error"}.jsonl`,
        line_count: lines.length,
        endpoint: batch.endpoint,
        content: Buffer.from(lines.map((l) => `${l}\n`).join("")),
      },
      client,
    );
    return { id: file.id, lines: lines.length };
  };
  const [output, error] = [await fileOf(true), await fileOf(false)];
  const files = { output: output.id, error: error.id, completed: output.lines, failed: error.lines };
  // The files hold every result now: the lines go, so the due-line scans never meet an ended batch's.
  await ports.lines.drop(client, batch.id);
  await ports.batches.ended(client, batch.id, status, files, status !== "cancelled" && wantsWebhook(batch));
}

/** Batches to end now: finalizing ones, in-progress ones past their window, cancelling ones with no line running (a dead replica's lease counts as not running). */
const ENDABLE = `(status = 'finalizing' OR (status = 'in_progress' AND expires_at <= now())
  OR (status = 'cancelling' AND NOT EXISTS (SELECT 1 FROM inference.batch_lines l
        WHERE l.batch_id = inference.batches.id AND l.status = 'running' AND l.next_at > now())))`;

/** Ends the batches that are done (or expired); returns how many moved (to finalizing, or ended). */
export async function finalizeBatches(ports: FinalizerPorts): Promise<number> {
  await ports.batches.refreshCounts();
  let ended = await ports.batches.finishedToFinalizing();
  for (let i = 0; i < PER_TICK; i++) {
    const moved = await transaction(ports.db, async (client) => {
      const batch = await ports.batches.lockOne(client, ["finalizing", "cancelling", "in_progress"], ENDABLE);
      if (!batch) return false;
      if (batch.status === "finalizing") await end(ports, client, batch, "completed");
      else if (batch.status === "cancelling") await end(ports, client, batch, "cancelled");
      else {
        const expired = (customId: string) => unrunLine(`batch_req_${ports.newId()}`, customId, "batch_expired", "The batch expired before this request ran");
        await ports.lines.failRemaining(client, batch.id, expired);
        await end(ports, client, batch, "expired");
      }
      return true;
    });
    if (!moved) break;
    ended++;
  }
  return ended;
}
