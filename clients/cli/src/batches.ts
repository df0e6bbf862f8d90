/**
 * batch submit|get|cancel|output: OpenAI's Batch API (/v1/files, /v1/batches). `submit --wait`
 * shows `completed/total` as lines finish (a bar on a terminal, a line per change elsewhere) and
 * exits 1 unless the batch completed.
 */
import { readFileSync } from "fs";
import type { Argv } from "yargs";
import { Batch, BATCH_ENDED } from "../../sdk/src";
import { Context, Run, UsageError } from "./context";
import { bar, liveLine, printRecord } from "./output";

const POLL_MS = 1000;
const ENDPOINTS = ["/v1/chat/completions", "/v1/embeddings"];

/** The batch's input: the file's bytes, and the endpoint its first line names (the server checks every line). */
function readInput(file: string): { content: Buffer; endpoint: string } {
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (err) {
    throw new UsageError(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const first = content
    .toString("utf8")
    .split("\n")
    .find((l) => l.trim() !== "");
  let url: unknown;
  try {
    url = first ? (JSON.parse(first) as { url?: unknown }).url : undefined;
  } catch {
    url = undefined;
  }
  if (typeof url !== "string" || !ENDPOINTS.includes(url))
    throw new UsageError(`${file}: its first line must be a request with "url" ${ENDPOINTS.join(" or ")}`);
  return { content, endpoint: url };
}

const done = (b: Batch) => (b.request_counts.completed ?? 0) + (b.request_counts.failed ?? 0);
const progressText = (b: Batch) =>
  `${b.id} ${b.status} ${done(b)}/${b.request_counts.total}${b.request_counts.failed ? ` (${b.request_counts.failed} failed)` : ""}`;

function showBatch(ctx: Context, b: Batch): void {
  const { id, status, endpoint, input_file_id, output_file_id, error_file_id, request_counts } = b;
  printRecord(ctx, ctx.json ? b : { id, status, endpoint, input_file_id, output_file_id, error_file_id, requests: `${done(b)}/${request_counts.total}` });
}

/** Polls until the batch ends: the live bar on a terminal, a line per change on a pipe. */
async function waitForBatch(ctx: Context, id: string): Promise<Batch> {
  const sdk = ctx.client();
  const line = liveLine(ctx.stderr);
  let last = "";
  try {
    for (;;) {
      const b = await sdk.getBatch(id);
      const text = progressText(b);
      if (ctx.stderr.isTTY) line.update(`${bar(done(b), b.request_counts.total, 20)} ${text}`);
      else if (text !== last && !ctx.json) ctx.stderr.write(`${text}\n`);
      last = text;
      if (BATCH_ENDED.has(b.status)) return b;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    line.done();
  }
}

export function batchCommands(y: Argv, run: Run): Argv {
  return y.command("batch", "batches of inference requests (OpenAI's Batch API), at the batch price", (b) =>
    b
      .command(
        "submit <file>",
        "upload a JSONL of requests and start a batch",
        (c) =>
          c
            .positional("file", { type: "string", demandOption: true })
            .option("wait", { type: "boolean", describe: "wait for the end, showing completed/total; exit 1 unless it completed" }),
        run(async (ctx, args: { file: string; wait?: boolean }) => {
          const { content, endpoint } = readInput(args.file);
          const sdk = ctx.client();
          const file = await sdk.uploadBatchFile(new Uint8Array(content), args.file.split("/").pop());
          const batch = await sdk.createBatch({ input_file_id: file.id, endpoint: endpoint as Batch["endpoint"], completion_window: "24h" });
          if (!args.wait) return showBatch(ctx, batch);
          const ended = await waitForBatch(ctx, batch.id);
          showBatch(ctx, ended);
          if (ended.status !== "completed") process.exitCode = 1;
        }),
      )
      .command(
        "get <id>",
        "a batch's status and counts",
        (c) => c.positional("id", { type: "string", demandOption: true }),
        run(async (ctx, args: { id: string }) => showBatch(ctx, await ctx.client().getBatch(args.id))),
      )
      .command(
        "cancel <id>",
        "cancel a batch (what finished is kept)",
        (c) => c.positional("id", { type: "string", demandOption: true }),
        run(async (ctx, args: { id: string }) => showBatch(ctx, await ctx.client().cancelBatch(args.id))),
      )
      .command(
        "output <id>",
        "print a batch's output lines (with --errors: its error lines)",
        (c) => c.positional("id", { type: "string", demandOption: true }).option("errors", { type: "boolean", describe: "the error file instead" }),
        run(async (ctx, args: { id: string; errors?: boolean }) => {
          const b = await ctx.client().getBatch(args.id);
          const fileId = args.errors ? b.error_file_id : b.output_file_id;
          if (!fileId) throw new UsageError(`Batch ${b.id} (${b.status}) has no ${args.errors ? "error" : "output"} file`);
          ctx.stdout.write(await ctx.client().fileContent(fileId));
        }),
      )
      .demandCommand(1),
  );
}
