/**
 * bench:inference — what the platform adds over calling the model provider directly, against the
 * Ollama stand-in in its own process, direct vs through the gateway and the inference service
 * (one process, as `npm start` runs them), in one run:
 *  1. non-streamed answers at 50 concurrent requests, the stand-in taking 100–300 ms per answer
 *     (p50, p99 of the whole answer);
 *  2. streamed answers' time to first byte, the first token after 100–300 ms;
 *  3. capacity: the stand-in answering at once, 50 concurrent (requests/s, and latency when the
 *     machine is the bottleneck).
 * Goals (1): overhead p50 ≤ +1 ms, p99 ≤ +5 ms.
 */
import { spawn } from "child_process";
import http from "http";
import os from "os";
import path from "path";
import readline from "readline";
import { randomUUID } from "crypto";
import { ChildService, dropDatabase, freePort, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { signAccessToken } from "../lib/jwt";

// The stand-in "thinks" 100 to 300 ms per answer (the same times on both paths): varied like a
// model's, which also keeps 50 closed-loop clients from marching in lock-step bursts.
const MODEL_MS = Number(process.env.BENCH_MODEL_MS || 100);
const JITTER_MS = Number(process.env.BENCH_JITTER_MS || 200);
const REQUESTS = Number(process.env.BENCH_REQUESTS || 1500); // non-streamed, per path
const STREAMS = Number(process.env.BENCH_STREAMS || 300); // streamed, per path
const CAPACITY_REQUESTS = Number(process.env.BENCH_CAPACITY_REQUESTS || 3000); // per path
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 50);
const STREAM_CONCURRENCY = 10;
const SECRET = "bench-secret";
const MODEL = "llama3.2:1b";

/** `body(i)` is the i-th request of a pass: its prompt's `#i` fixes the stand-in's answer time, so
 * both paths see exactly the same times and their percentiles differ only by the platform. */
type Target = { port: number; path: string; headers: Record<string, string>; body: (i: number) => string };
type Figures = { p50: number; p99: number; rps: number };

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

/** One request; resolves with ms until the whole body (or, with `firstByte`, its first byte). */
function once(t: Target, firstByte: boolean, i = 0): Promise<number> {
  const body = t.body(i);
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.request({ host: "127.0.0.1", port: t.port, path: t.path, method: "POST", agent, headers: { ...t.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) } });
    req.once("error", reject);
    req.once("response", (res) => {
      if (res.statusCode !== 200) return reject(new Error(`${t.path} answered ${res.statusCode}`));
      let first: bigint | undefined;
      res.on("data", () => (first ??= process.hrtime.bigint()));
      res.once("end", () => resolve(Number((firstByte ? first! : process.hrtime.bigint()) - started) / 1e6));
      res.once("error", reject);
    });
    req.end(body);
  });
}

/** `total` requests, `concurrency` at a time (closed loop). */
async function run(t: Target, total: number, concurrency: number, firstByte = false): Promise<Figures> {
  const samples: number[] = [];
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        samples.push(await once(t, firstByte, i));
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  return { p50: at(0.5), p99: at(0.99), rps: Math.round(total / seconds) };
}

type StandinProcess = { url: string; script(script: Record<string, unknown>): Promise<void>; stop(): void };

function startStandin(): Promise<StandinProcess> {
  const proc = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "inference-standin.ts")], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: proc.stdout! });
  const nextLine = () => new Promise<string>((resolve) => lines.once("line", resolve));
  return new Promise((resolve, reject) => {
    proc.once("exit", (code) => reject(new Error(`stand-in exited (${code})`)));
    void nextLine().then((line) =>
      resolve({
        url: JSON.parse(line).url,
        async script(script) {
          const answered = nextLine();
          proc.stdin!.write(`${JSON.stringify(script)}\n`);
          await answered;
        },
        stop: () => proc.stdin!.end(),
      }),
    );
  });
}

const ms = (v: number) => `${v.toFixed(2)} ms`;
const plus = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;
const mean = (a: Figures, b: Figures): Figures => ({ p50: (a.p50 + b.p50) / 2, p99: (a.p99 + b.p99) / 2, rps: Math.round((a.rps + b.rps) / 2) });

/** Direct and platform passes, alternated (two halves each) so drift on a shared machine hits both. */
async function compare(direct: Target, platform: Target, total: number, concurrency: number, firstByte = false): Promise<[Figures, Figures]> {
  await run(direct, Math.min(200, total), concurrency, firstByte); // warm-up: JIT, connection pools, model list cache
  await run(platform, Math.min(200, total), concurrency, firstByte);
  const half = Math.ceil(total / 2);
  const d1 = await run(direct, half, concurrency, firstByte);
  const p1 = await run(platform, half, concurrency, firstByte);
  const d2 = await run(direct, half, concurrency, firstByte);
  const p2 = await run(platform, half, concurrency, firstByte);
  return [mean(d1, d2), mean(p1, p2)];
}

async function main() {
  const databaseUrl = testDatabaseUrl();
  const standin = await startStandin();
  const port = await freePort();
  let platform: ChildService | undefined;
  try {
    platform = spawnServices(["api-gateway", "inference"], {
      PORT: String(port),
      TRANSPORTER: "",
      NAMESPACE: uniqueName("bench"),
      DATABASE_URL: databaseUrl,
      JWT_SECRET: SECRET,
      OLLAMA_URL: standin.url,
      LOG_LEVEL: "warn",
    });
    const standinPort = Number(new URL(standin.url).port);
    const prompt = (i: number) => `Why is the sky blue? Answer in one sentence. #${i}`;
    const direct = (stream: boolean): Target => ({
      port: standinPort,
      path: "/api/chat",
      headers: {},
      body: (i) => JSON.stringify({ model: MODEL, messages: [{ role: "user", content: prompt(i) }], stream, options: { temperature: 0.7, num_predict: 1024 } }),
    });
    const token = signAccessToken(randomUUID(), "client", SECRET);
    const viaPlatform = (stream: boolean): Target => ({
      port,
      path: "/api/models/infer",
      headers: { authorization: `Bearer ${token}` },
      body: (i) => JSON.stringify({ model: MODEL, prompt: prompt(i), stream }),
    });
    await waitFor(() => once(viaPlatform(false), false).catch(() => false), { timeoutMs: 30_000, intervalMs: 200, message: "the platform to answer" });

    const rows: Array<[string, Figures, Figures]> = [];
    await standin.script({ delayMs: MODEL_MS, jitterMs: JITTER_MS, chunkDelayMs: 5 });
    const nonStreamed = await compare(direct(false), viaPlatform(false), REQUESTS, CONCURRENCY);
    rows.push([`non-streamed, ${CONCURRENCY} concurrent, answers in ${MODEL_MS}–${MODEL_MS + JITTER_MS} ms`, ...nonStreamed]);
    rows.push([`streamed TTFB, ${STREAM_CONCURRENCY} concurrent, first token in ${MODEL_MS}–${MODEL_MS + JITTER_MS} ms`, ...(await compare(direct(true), viaPlatform(true), STREAMS, STREAM_CONCURRENCY, true))]);
    await standin.script({ delayMs: 0 });
    rows.push([`capacity: non-streamed, ${CONCURRENCY} concurrent, instant answers`, ...(await compare(direct(false), viaPlatform(false), CAPACITY_REQUESTS, CONCURRENCY))]);

    console.log(`\nbench:inference — Ollama stand-in (own process), platform = gateway + inference in one process (${os.cpus().length} CPUs)`);
    console.log("| case | direct p50 | platform p50 | overhead p50 | direct p99 | platform p99 | overhead p99 | direct req/s | platform req/s |");
    console.log("|---|---|---|---|---|---|---|---|---|");
    for (const [label, d, p] of rows)
      console.log(`| ${label} | ${ms(d.p50)} | ${ms(p.p50)} | ${plus(p.p50 - d.p50)} | ${ms(d.p99)} | ${ms(p.p99)} | ${plus(p.p99 - d.p99)} | ${d.rps} | ${p.rps} |`);
    const [d, p] = nonStreamed;
    console.log(`\nGoals (non-streamed, ${CONCURRENCY} concurrent): overhead p50 ≤ +1 ms: ${p.p50 - d.p50 <= 1 ? "met" : "NOT met"}; p99 ≤ +5 ms: ${p.p99 - d.p99 <= 5 ? "met" : "NOT met"}`);
  } finally {
    await platform?.stop();
    standin.stop();
    agent.destroy();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
