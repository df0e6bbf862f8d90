/**
 * bench:batches — the Batch API under way beside interactive chat. One OpenAI-format provider
 * stand-in in its own process answers every request after the same fixed latency
 * (BENCH_BATCH_LATENCY_MS, default 20 ms, no jitter); the platform (gateway + auth + inference in
 * one process, bench/inference-platform.ts) runs one batch of BENCH_BATCH_LINES chat lines
 * (default 10,000) uploaded and created with the official `openai` client, at
 * BENCH_BATCH_CONCURRENCY lines in flight (default 16). Interactive chat (POST /v1/chat/completions,
 * JWT, concurrency 1) is measured before the batch, while it runs (from in_progress until it
 * leaves it) and after it, so drift on a shared machine shows as a gap between the two passes
 * without it. Prints the batch's lines/s and the interactive p50/p99 with and without it; goal:
 * the interactive p50 while the batch runs within 10 % of the p50 without it.
 * Load-independent: the stand-in counts the batch lines in flight as each interactive request
 * arrives (what it queues beside), printed for the pass while the batch runs. BENCH_BATCH_PACED sets
 * BATCH_PACED_IN_FLIGHT (default: the platform's, 1; BATCH_MAX_IN_FLIGHT, 32, turns pacing off).
 * BENCH_PROFILE_DIR writes a CPU profile of the platform's process there.
 */
import OpenAI, { toFile } from "openai";
import os from "os";
import { testDatabaseUrl, waitFor } from "../test/support/platform";
import { figuresOf, Figures, once, Target } from "./inference-measure";
import { ask, BenchPlatform, runBench, script, startHelper, startPlatform, stopAll } from "./inference-platform";

const LINES = Number(process.env.BENCH_BATCH_LINES || 10_000);
const LATENCY_MS = Number(process.env.BENCH_BATCH_LATENCY_MS || 20);
const CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY || 16);
const INTERACTIVE = Number(process.env.BENCH_BATCH_INTERACTIVE || 300); // requests per pass without the batch
const DURING_MAX = 20_000; // interactive requests while the batch runs, at most
const PACED = process.env.BENCH_BATCH_PACED; // BATCH_PACED_IN_FLIGHT
// Paced to one line while chat runs, a batch goes at about one line per latency: minutes for 10,000.
const BATCH_TIMEOUT_MS = Number(process.env.BENCH_BATCH_TIMEOUT_MS || 900_000);
const MODEL = "llama3.2:1b";
/** The batch's status is read this often (and, alike, the batch list during the passes without it). */
const POLL_MS = Number(process.env.BENCH_BATCH_POLL_MS || 100);
const GOAL = 0.1;

const sec = () => Number(process.hrtime.bigint()) / 1e9;
const ms = (v: number) => `${v.toFixed(2)} ms`;

/** Closed-loop requests at concurrency 1, `count` of them or until `until()` holds. */
async function pass(t: Target, count: number, until: () => boolean = () => false): Promise<Figures> {
  const samples: number[] = [];
  const started = sec();
  try {
    while (samples.length < count && !until()) samples.push(await once(t, false, samples.length));
  } catch (err) {
    return { error: (err as Error).message };
  }
  return figuresOf([{ samples, seconds: sec() - started }]);
}

/** `work` while `poll` runs every POLL_MS beside it. */
async function polled<T>(poll: () => Promise<unknown>, work: () => Promise<T>): Promise<T> {
  let on = true;
  const poller = (async () => {
    while (on) {
      await poll();
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();
  try {
    return await work();
  } finally {
    on = false;
    await poller;
  }
}

const row = (label: string, f: Figures, base?: number) =>
  "error" in f
    ? `| ${label} | failed: ${f.error.slice(0, 120)} | | | |`
    : `| ${label} | ${ms(f.p50)} | ${ms(f.p99)} | ${f.rps} | ${base === undefined ? "" : `${((f.p50 / base - 1) * 100).toFixed(1)} %`} |`;

async function main() {
  const databaseUrl = testDatabaseUrl();
  const standin = await startHelper("inference-standin.ts", { STANDIN: "openai" });
  let platform: BenchPlatform | undefined;
  try {
    await script(standin, { delayMs: LATENCY_MS, jitterMs: 0 });
    await ask(standin, { tally: "Label item" }); // batch lines' prompts
    platform = await startPlatform(databaseUrl, standin.url, { BATCH_CONCURRENCY: String(CONCURRENCY), ...(PACED ? { BATCH_PACED_IN_FLIGHT: PACED } : {}) });
    const { port, jwt } = platform;
    const chat: Target = {
      name: "platform /v1",
      port,
      path: "/v1/chat/completions",
      headers: { authorization: `Bearer ${jwt}` },
      body: (i) => JSON.stringify({ model: MODEL, messages: [{ role: "user", content: `Why is the sky blue? #${i}` }], max_tokens: 1024 }),
    };
    await waitFor(() => once(chat, false).catch(() => false), { timeoutMs: 30_000, intervalMs: 200, message: "the platform to answer" });
    await pass(chat, 100); // JIT, pools, model list cache
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: jwt, maxRetries: 0 });
    // The passes without the batch carry the same status polling as the pass beside it (a list instead of a retrieve).
    const before = await polled(
      () => client.batches.list({ limit: 1 }),
      () => pass(chat, INTERACTIVE),
    );

    const jsonl = Array.from({ length: LINES }, (_, i) =>
      JSON.stringify({
        custom_id: `line-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: MODEL, messages: [{ role: "user", content: `Label item ${i}` }] },
      }),
    ).join("\n");
    const t0 = sec();
    const file = await client.files.create({ file: await toFile(Buffer.from(`${jsonl}\n`), "bench.jsonl"), purpose: "batch" });
    const uploaded = sec();
    const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const createdAt = sec();

    // The batch's status every POLL_MS; the interactive pass runs while it is in_progress.
    let status = created.status;
    let inProgressAt: number | undefined;
    let leftAt: number | undefined;
    let polling = true;
    let shownAt = 0;
    const poller = (async () => {
      while (polling) {
        const b = await client.batches.retrieve(created.id);
        if (b.status === "in_progress") inProgressAt ??= sec();
        else if (inProgressAt !== undefined) leftAt ??= sec();
        status = b.status;
        const done = (b.request_counts?.completed ?? 0) + (b.request_counts?.failed ?? 0);
        if (Math.floor(sec()) % 10 === 0 && Math.floor(sec()) !== shownAt)
          console.error(`  ${((shownAt = Math.floor(sec())), status)}: ${done}/${LINES} lines`);
        if (["completed", "failed", "expired", "cancelled"].includes(status)) return b;
        if (sec() - createdAt > BATCH_TIMEOUT_MS / 1000) throw new Error(`batch still ${status} after ${BATCH_TIMEOUT_MS} ms`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      return undefined;
    })().finally(() => (polling = false));
    poller.catch(() => undefined); // awaited below, after the interactive pass
    await waitFor(() => inProgressAt !== undefined || !polling, { timeoutMs: 60_000, intervalMs: 10, message: "the batch to start" });
    await ask(standin, { report: true }); // from here on
    const during = await pass(chat, DURING_MAX, () => leftAt !== undefined || !polling);
    const beside = JSON.parse(await ask(standin, { report: true })) as { interactive: number; mean: number; p50: number; max: number };
    const ended = await poller;
    const completedAt = sec();
    const after = await polled(
      () => client.batches.list({ limit: 1 }),
      () => pass(chat, INTERACTIVE),
    );

    if (!ended || ended.status !== "completed") throw new Error(`the batch ended ${ended?.status}: ${JSON.stringify(ended?.errors ?? null)}`);
    const outLines = ended.output_file_id ? (await (await client.files.content(ended.output_file_id)).text()).trim().split("\n").length : 0;
    const counts = ended.request_counts!;

    console.log(
      `\nbench:batches — OpenAI-format stand-in answering in ${LATENCY_MS} ms (fixed); platform (gateway + auth + inference) in one process, ` +
        `BATCH_CONCURRENCY=${CONCURRENCY}, BATCH_PACED_IN_FLIGHT=${PACED ?? "default"}; ${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)} at the end`,
    );
    console.log(
      `batch: ${LINES} lines (${(Buffer.byteLength(jsonl) / 1e6).toFixed(1)} MB), completed ${counts.completed}, failed ${counts.failed}, output file ${outLines} lines; ` +
        `upload ${(uploaded - t0).toFixed(2)} s, created → in_progress ${((inProgressAt ?? createdAt) - createdAt).toFixed(2)} s, ` +
        `in_progress ${((leftAt ?? completedAt) - (inProgressAt ?? createdAt)).toFixed(2)} s, created → completed ${(completedAt - createdAt).toFixed(2)} s`,
    );
    const runRate = LINES / ((leftAt ?? completedAt) - (inProgressAt ?? createdAt));
    console.log(
      `lines/s: ${runRate.toFixed(0)} while in_progress, ${(LINES / (completedAt - createdAt)).toFixed(0)} created → completed ` +
        `(ceiling at ${CONCURRENCY} in flight and ${LATENCY_MS} ms: ${Math.round((CONCURRENCY * 1000) / LATENCY_MS)})`,
    );
    console.log(
      `batch lines in flight at the stand-in as each interactive request arrived while the batch ran (${beside.interactive} requests): ` +
        `mean ${beside.mean.toFixed(2)}, p50 ${beside.p50}, max ${beside.max}`,
    );
    const base = [before, after].filter((f): f is Exclude<Figures, { error: string }> => !("error" in f));
    const baseP50 = base.length ? base.reduce((s, f) => s + f.p50, 0) / base.length : undefined;
    console.log("\n| interactive chat, concurrency 1 | p50 | p99 | req/s | p50 vs without the batch |");
    console.log("|---|---|---|---|---|");
    console.log(row("without the batch, before", before));
    console.log(row("while the batch runs", during, baseP50));
    console.log(row("without the batch, after", after));
    if (baseP50 !== undefined && !("error" in during)) {
      const ratio = during.p50 / baseP50;
      console.log(
        `\nInteractive p50 while the batch runs / without it (mean of before and after, ${ms(baseP50)}): ${ratio.toFixed(3)} ` +
          `(goal ≤ ${(1 + GOAL).toFixed(2)}: ${ratio <= 1 + GOAL ? "met" : "NOT met"})`,
      );
    }
  } finally {
    await stopAll(databaseUrl, platform, [standin]);
  }
}

runBench(main);
