/**
 * bench:inference — what the platform adds over calling the model provider directly, against the
 * Ollama stand-in in its own process. Three paths, in one run, passes alternated so drift on a
 * shared machine hits them alike:
 *  - direct: the client calls the stand-in;
 *  - bare proxy: a node:http process that only forwards (bench/inference-bare-proxy.ts): what any
 *    extra process hop costs on this machine, the floor for a gateway;
 *  - platform: gateway + inference service in one process (as `npm start` runs them), JWT auth.
 * Cases: (1) non-streamed answers at 50 concurrent requests, the stand-in taking 100–300 ms;
 * (2) streamed answers' time to first byte, first token after 100–300 ms; (3) capacity: instant
 * answers at 50 concurrent. Goals for (1): platform over direct p50 ≤ +1 ms, p99 ≤ +5 ms.
 */
import { ChildProcess, spawn } from "child_process";
import http from "http";
import os from "os";
import path from "path";
import readline from "readline";
import { ChildService, dropDatabase, freePort, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";

// The stand-in "thinks" 100 to 300 ms per answer (the same times on every path): varied like a
// model's, which also keeps 50 closed-loop clients from marching in lock-step bursts.
const MODEL_MS = Number(process.env.BENCH_MODEL_MS || 100);
const JITTER_MS = Number(process.env.BENCH_JITTER_MS || 200);
const REQUESTS = Number(process.env.BENCH_REQUESTS || 1200); // non-streamed, per path
const STREAMS = Number(process.env.BENCH_STREAMS || 240); // streamed, per path
const CAPACITY_REQUESTS = Number(process.env.BENCH_CAPACITY_REQUESTS || 3000); // per path
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 50);
const STREAM_CONCURRENCY = 10;
const SECRET = "bench-secret";
const MODEL = "llama3.2:1b";

/** `body(i)` is the i-th request of a pass: its prompt's `#i` fixes the stand-in's answer time, so
 * every path sees exactly the same times and their percentiles differ only by what is in between. */
type Target = { port: number; path: string; headers: Record<string, string>; body: (i: number) => string };
type Figures = { p50: number; p99: number; rps: number };

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One request; resolves with ms until the whole body (or, with `firstByte`, its first byte). */
function once(t: Target, firstByte: boolean, i = 0): Promise<number> {
  const body = t.body(i);
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.request({
      host: "127.0.0.1",
      port: t.port,
      path: t.path,
      method: "POST",
      agent,
      headers: { ...t.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
    });
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

/** A helper process that prints one JSON line with its URL and exits when its stdin closes. */
function startHelper(file: string, env: Record<string, string> = {}): Promise<{ url: string; proc: ChildProcess; lines: readline.Interface }> {
  const proc = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, file)], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = readline.createInterface({ input: proc.stdout! });
  return new Promise((resolve, reject) => {
    proc.once("exit", (code) => reject(new Error(`${file} exited (${code})`)));
    lines.once("line", (line) => resolve({ url: JSON.parse(line).url, proc, lines }));
  });
}

async function startStandin() {
  const { url, proc, lines } = await startHelper("inference-standin.ts");
  return {
    url,
    /** Replaces the stand-in's script; resolves once it answered. */
    async script(script: Record<string, unknown>) {
      const answered = new Promise((resolve) => lines.once("line", resolve));
      proc.stdin!.write(`${JSON.stringify(script)}\n`);
      await answered;
    },
    stop: () => proc.stdin!.end(),
  };
}

const ms = (v: number) => `${v.toFixed(2)} ms`;
const plus = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;
const mean = (a: Figures, b: Figures): Figures => ({ p50: (a.p50 + b.p50) / 2, p99: (a.p99 + b.p99) / 2, rps: Math.round((a.rps + b.rps) / 2) });

/** Every path warmed up, then two alternated halves each. */
async function compare(targets: Target[], total: number, concurrency: number, firstByte = false): Promise<Figures[]> {
  for (const t of targets) await run(t, Math.min(200, total), concurrency, firstByte); // JIT, pools, model list cache
  const half = Math.ceil(total / 2);
  const first: Figures[] = [];
  for (const t of targets) first.push(await run(t, half, concurrency, firstByte));
  const second: Figures[] = [];
  for (const t of targets) second.push(await run(t, half, concurrency, firstByte));
  return first.map((f, i) => mean(f, second[i]));
}

async function main() {
  const databaseUrl = testDatabaseUrl();
  const standin = await startStandin();
  const proxy = await startHelper("inference-bare-proxy.ts", { PROVIDER_URL: standin.url });
  const port = await freePort();
  let platform: ChildService | undefined;
  try {
    platform = spawnServices(["api-gateway", "auth", "inference"], {
      PORT: String(port),
      TRANSPORTER: "",
      NAMESPACE: uniqueName("bench"),
      DATABASE_URL: databaseUrl,
      JWT_SECRET: SECRET,
      OLLAMA_URL: standin.url,
      LOG_LEVEL: "warn",
    });
    const prompt = (i: number) => `Why is the sky blue? Answer in one sentence. #${i}`;
    const ollamaChat = (port: number, stream: boolean): Target => ({
      port,
      path: "/api/chat",
      headers: {},
      body: (i) => JSON.stringify({ model: MODEL, messages: [{ role: "user", content: prompt(i) }], stream, options: { temperature: 0.7, num_predict: 1024 } }),
    });
    // A JWT of a registered account: tokens of accounts that do not exist are refused.
    const token = await waitFor(
      async () => {
        const body = JSON.stringify({ email: `${uniqueName("bench")}@example.com`, name: "Bench", password: "password-123" });
        const res = await fetch(`http://127.0.0.1:${port}/api/auth/register`, { method: "POST", headers: { "content-type": "application/json" }, body }).catch(
          () => undefined,
        );
        return res?.status === 201 ? ((await res.json()) as { accessToken: string }).accessToken : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, message: "a registered account" },
    );
    const viaPlatform = (stream: boolean): Target => ({
      port,
      path: "/api/models/infer",
      headers: { authorization: `Bearer ${token}` },
      body: (i) => JSON.stringify({ model: MODEL, prompt: prompt(i), stream }),
    });
    const paths = (stream: boolean) => [
      ollamaChat(Number(new URL(standin.url).port), stream),
      ollamaChat(Number(new URL(proxy.url).port), stream),
      viaPlatform(stream),
    ];
    await waitFor(() => once(viaPlatform(false), false).catch(() => false), { timeoutMs: 30_000, intervalMs: 200, message: "the platform to answer" });

    const cases: Array<[string, Figures[]]> = [];
    await standin.script({ delayMs: MODEL_MS, jitterMs: JITTER_MS, chunkDelayMs: 5 });
    const nonStreamed = await compare(paths(false), REQUESTS, CONCURRENCY);
    cases.push([`non-streamed, ${CONCURRENCY} concurrent, answers in ${MODEL_MS}–${MODEL_MS + JITTER_MS} ms`, nonStreamed]);
    cases.push([
      `streamed TTFB, ${STREAM_CONCURRENCY} concurrent, first token in ${MODEL_MS}–${MODEL_MS + JITTER_MS} ms`,
      await compare(paths(true), STREAMS, STREAM_CONCURRENCY, true),
    ]);
    await standin.script({ delayMs: 0 });
    cases.push([`capacity: non-streamed, ${CONCURRENCY} concurrent, instant answers`, await compare(paths(false), CAPACITY_REQUESTS, CONCURRENCY)]);

    console.log(
      `\nbench:inference — Ollama stand-in, bare proxy and platform each in its own process; ${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)} at the end`,
    );
    console.log("| case | path | p50 | p99 | req/s | p50 over direct | p99 over direct |");
    console.log("|---|---|---|---|---|---|---|");
    for (const [label, [direct, ...others]] of cases) {
      console.log(`| ${label} | direct | ${ms(direct.p50)} | ${ms(direct.p99)} | ${direct.rps} | | |`);
      others.forEach((f, i) =>
        console.log(
          `| | ${i === 0 ? "bare proxy" : "platform"} | ${ms(f.p50)} | ${ms(f.p99)} | ${f.rps} | ${plus(f.p50 - direct.p50)} | ${plus(f.p99 - direct.p99)} |`,
        ),
      );
    }
    const [d, bare, p] = nonStreamed;
    console.log(`\nPlatform over the bare proxy (non-streamed): p50 ${plus(p.p50 - bare.p50)}, p99 ${plus(p.p99 - bare.p99)}`);
    console.log(
      `Goals (non-streamed, platform over direct): p50 ≤ +1 ms: ${p.p50 - d.p50 <= 1 ? "met" : "NOT met"}; p99 ≤ +5 ms: ${p.p99 - d.p99 <= 5 ? "met" : "NOT met"}`,
    );
  } finally {
    await platform?.stop();
    proxy.proc.stdin!.end();
    standin.stop();
    agent.destroy();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
