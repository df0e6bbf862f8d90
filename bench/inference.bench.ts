/**
 * bench:inference — what a gateway adds over calling the model provider directly. One provider
 * stand-in speaking OpenAI's wire format, in its own process; every path reaches that same
 * stand-in, and the passes alternate so drift on a shared machine hits them alike:
 *  - direct: the client calls the stand-in's /v1/chat/completions;
 *  - bare proxy: a node:http process that only forwards (bench/inference-bare-proxy.ts): what any
 *    extra process hop costs on this machine, the floor for a gateway;
 *  - portkey: Portkey's open-source AI gateway (bench/portkey.ts), same body;
 *  - platform /v1: gateway + auth + inference in one process (as `npm start` runs them), the
 *    OpenAI-compatible route, same body, with a JWT; and again with an API key (auth's answer
 *    cached by each gateway replica for at most 1 s: a rotated key stops within 1 s);
 *  - platform /api: the same platform's POST /api/models/infer, with a JWT.
 * Cases: concurrency 1 with instant answers (the overhead itself, least exposed to scheduling
 * noise), concurrency 1 (answers in 10–30 ms) and 50 (100–300 ms), non-streamed (whole answer)
 * and streamed (time to first byte); then capacity (instant answers, 50 concurrent). Paths take turns in short rounds (see compare).
 * Goals: the platform's added p50 ≤ 1 ms and below Portkey's.
 */
import { ChildProcess, spawn } from "child_process";
import http from "http";
import os from "os";
import path from "path";
import readline from "readline";
import { ChildService, dropDatabase, freePort, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { installPortkey, Portkey, PORTKEY_VERSION, startPortkey } from "./portkey";

const REQUESTS = Number(process.env.BENCH_REQUESTS || 1200); // 50 concurrent, non-streamed, per path
const STREAMS = Number(process.env.BENCH_STREAMS || 500); // 50 concurrent, streamed, per path
const SERIAL = Number(process.env.BENCH_SERIAL || 150); // concurrency 1, per path
const SERIAL_INSTANT = Number(process.env.BENCH_SERIAL_INSTANT || 1000); // concurrency 1, instant answers, per path
const CAPACITY_REQUESTS = Number(process.env.BENCH_CAPACITY_REQUESTS || 3000);
const CONCURRENCY = 50;
const MODEL = "llama3.2:1b";

/** `body(i)`: the i-th request of a pass; its prompt's `#i` fixes the stand-in's answer time, the same on every path. */
type Target = { name: string; port: number; path: string; headers: Record<string, string>; body: (i: number, stream: boolean) => string };
type Figures = { p50: number; p99: number; rps: number } | { error: string };

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One request; resolves with ms until the whole body (or, with `firstByte`, its first byte). */
function once(t: Target, stream: boolean, i = 0): Promise<number> {
  const body = t.body(i, stream);
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const headers = { ...t.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) };
    const req = http.request({ host: "127.0.0.1", port: t.port, path: t.path, method: "POST", agent, headers });
    req.once("error", reject);
    req.once("response", (res) => {
      let first: bigint | undefined;
      let text = "";
      res.on("data", (d) => {
        first ??= process.hrtime.bigint();
        if (res.statusCode !== 200) text += d;
      });
      res.once("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`${res.statusCode} ${text.slice(0, 200)}`));
        resolve(Number((stream ? first! : process.hrtime.bigint()) - started) / 1e6);
      });
      res.once("error", reject);
    });
    req.end(body);
  });
}

type Run = { samples: number[]; seconds: number } | { error: string };

/** `total` requests, `concurrency` at a time (closed loop), numbered from `first`. */
async function run(t: Target, total: number, concurrency: number, stream: boolean, first = 0): Promise<Run> {
  const samples: number[] = [];
  let next = 0;
  const started = process.hrtime.bigint();
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) samples.push(await once(t, stream, first + next++));
      }),
    );
  } catch (err) {
    return { error: (err as Error).message };
  }
  return { samples, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

/** Percentiles over every sample of a path's runs. */
function figuresOf(runs: Run[]): Figures {
  const failed = runs.find((r) => "error" in r);
  if (failed) return failed as { error: string };
  const ok = runs as Array<{ samples: number[]; seconds: number }>;
  const samples = ok.flatMap((r) => r.samples).sort((a, b) => a - b);
  const seconds = ok.reduce((sum, r) => sum + r.seconds, 0);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  return { p50: at(0.5), p99: at(0.99), rps: Math.round(samples.length / seconds) };
}

/**
 * Every path warmed up, then the requests in many short rounds, path after path (10 requests per
 * round at concurrency 1): load from outside the benchmark, which comes in bursts on a shared
 * machine, falls on every path alike instead of on whichever ran during the burst.
 */
async function compare(targets: Target[], total: number, concurrency: number, stream: boolean): Promise<Figures[]> {
  for (const t of targets) await run(t, Math.min(100, total), concurrency, stream); // JIT, pools, model list cache
  const rounds = concurrency === 1 ? Math.ceil(total / 10) : 8;
  const per = Math.ceil(total / rounds);
  const runs: Run[][] = targets.map(() => []);
  for (let r = 0; r < rounds; r++)
    for (const [i, t] of targets.entries()) {
      // A path that failed is not asked again (Portkey's streams).
      if (!runs[i].some((x) => "error" in x)) runs[i].push(await run(t, per, concurrency, stream, r * per));
    }
  return runs.map(figuresOf);
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

/** Replaces the stand-in's script; resolves once it answered. */
async function script(standin: { proc: ChildProcess; lines: readline.Interface }, s: Record<string, unknown>) {
  const answered = new Promise((resolve) => standin.lines.once("line", resolve));
  standin.proc.stdin!.write(`${JSON.stringify(s)}\n`);
  await answered;
}

const ms = (v: number) => `${v.toFixed(2)} ms`;
const plus = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;

async function main() {
  const databaseUrl = testDatabaseUrl();
  const standin = await startHelper("inference-standin.ts", { STANDIN: "openai" });
  const proxy = await startHelper("inference-bare-proxy.ts", { PROVIDER_URL: standin.url });
  const installed = installPortkey();
  let portkey: Portkey | undefined;
  let portkeyProblem = "error" in installed ? installed.error : undefined;
  if ("dir" in installed) portkey = await startPortkey(installed.dir, await freePort()).catch((err: Error) => ((portkeyProblem = err.message), undefined));
  const port = await freePort();
  let platform: ChildService | undefined;
  try {
    platform = spawnServices(["api-gateway", "auth", "inference"], {
      PORT: String(port),
      TRANSPORTER: "",
      NAMESPACE: uniqueName("bench"),
      DATABASE_URL: databaseUrl,
      OLLAMA_URL: "off",
      OPENAI_PROVIDERS: JSON.stringify([{ name: "vllm", url: standin.url }]),
      LOG_LEVEL: "warn",
    });
    // A JWT and an API key of a registered account (OpenAI clients send either as their API key).
    const post = (p: string, body?: unknown, token?: string) =>
      fetch(`http://127.0.0.1:${port}${p}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const jwt = await waitFor(
      async () => {
        const reg = await post("/api/auth/register", { email: `${uniqueName("bench")}@example.com`, name: "Bench", password: "password-123" }).catch(
          () => undefined,
        );
        return reg?.status === 201 ? ((await reg.json()) as { accessToken: string }).accessToken : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, message: "a registered account" },
    );
    const apiKey = ((await (await post("/api/auth/api-keys", undefined, jwt)).json()) as { apiKey: string }).apiKey;
    const prompt = (i: number) => `Why is the sky blue? Answer in one sentence. #${i}`;
    const chat = (i: number, stream: boolean) => JSON.stringify({ model: MODEL, messages: [{ role: "user", content: prompt(i) }], stream, max_tokens: 1024 });
    const openAiPath = (name: string, p: number, headers: Record<string, string> = {}): Target => ({
      name,
      port: p,
      path: "/v1/chat/completions",
      headers,
      body: chat,
    });
    const auth = { authorization: `Bearer ${jwt}` };
    const targets: Target[] = [
      openAiPath("direct", Number(new URL(standin.url).port)),
      openAiPath("bare proxy", Number(new URL(proxy.url).port)),
      ...(portkey ? [openAiPath("portkey", portkey.port, { "x-portkey-provider": "openai", "x-portkey-custom-host": `${standin.url}/v1`, ...auth })] : []),
      openAiPath("platform /v1", port, auth),
      openAiPath("platform /v1, API key", port, { authorization: `Bearer ${apiKey}` }),
      {
        name: "platform /api",
        port,
        path: "/api/models/infer",
        headers: auth,
        body: (i, stream) => JSON.stringify({ model: MODEL, prompt: prompt(i), stream }),
      },
    ];
    await waitFor(() => once(targets[targets.length - 1], false).catch(() => false), { timeoutMs: 30_000, intervalMs: 200, message: "the platform to answer" });

    const cases: Array<[string, Figures[]]> = [];
    await script(standin, { delayMs: 0 });
    cases.push(["non-streamed, concurrency 1, instant answers", await compare(targets, SERIAL_INSTANT, 1, false)]);
    await script(standin, { delayMs: 10, jitterMs: 20, chunkDelayMs: 2 });
    cases.push(["non-streamed, concurrency 1, answers in 10–30 ms", await compare(targets, SERIAL, 1, false)]);
    cases.push(["streamed TTFB, concurrency 1, first token in 10–30 ms", await compare(targets, SERIAL, 1, true)]);
    await script(standin, { delayMs: 100, jitterMs: 200, chunkDelayMs: 5 });
    cases.push([`non-streamed, ${CONCURRENCY} concurrent, answers in 100–300 ms`, await compare(targets, REQUESTS, CONCURRENCY, false)]);
    cases.push([`streamed TTFB, ${CONCURRENCY} concurrent, first token in 100–300 ms`, await compare(targets, STREAMS, CONCURRENCY, true)]);
    await script(standin, { delayMs: 0 });
    cases.push([`capacity: non-streamed, ${CONCURRENCY} concurrent, instant answers`, await compare(targets, CAPACITY_REQUESTS, CONCURRENCY, false)]);

    console.log(
      `\nbench:inference — OpenAI-format stand-in; bare proxy, Portkey ${PORTKEY_VERSION} and the platform each in its own process; ` +
        `${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)} at the end`,
    );
    if (portkeyProblem) console.log(`Portkey not measured: ${portkeyProblem}`);
    console.log("| case | path | p50 | p99 | req/s | added p50 | added p99 |");
    console.log("|---|---|---|---|---|---|---|");
    for (const [label, figures] of cases) {
      const direct = figures[0];
      figures.forEach((f, i) => {
        const cells =
          "error" in f
            ? `failed: ${f.error.replace(/\|/g, "/").slice(0, 120)} | | | | |`
            : `${ms(f.p50)} | ${ms(f.p99)} | ${f.rps} | ${i === 0 || "error" in direct ? "" : plus(f.p50 - direct.p50)} | ${i === 0 || "error" in direct ? "" : plus(f.p99 - direct.p99)} |`;
        console.log(`| ${i === 0 ? label : ""} | ${targets[i].name} | ${cells}`);
      });
    }
    const added = (figures: Figures[], name: string) => {
      const f = figures[targets.findIndex((t) => t.name === name)];
      const d = figures[0];
      return f && !("error" in f) && !("error" in d) ? f.p50 - d.p50 : undefined;
    };
    console.log("\nAdded p50 per case (platform /v1 · /v1 with an API key · /api · Portkey):");
    for (const [label, figures] of cases) {
      const [v1, v1Key, api, pk] = ["platform /v1", "platform /v1, API key", "platform /api", "portkey"].map((n) => added(figures, n));
      const show = (v?: number) => (v === undefined ? "n/a" : plus(v));
      const verdict =
        v1 === undefined ? "" : `; /v1 ≤ +1 ms: ${v1 <= 1 ? "met" : "NOT met"}${pk === undefined ? "" : `, below Portkey: ${v1 < pk ? "yes" : "no"}`}`;
      console.log(`- ${label}: ${show(v1)} · ${show(v1Key)} · ${show(api)} · ${show(pk)}${verdict}`);
    }
  } finally {
    await platform?.stop();
    portkey?.stop();
    proxy.proc.stdin!.end();
    standin.proc.stdin!.end();
    agent.destroy();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
