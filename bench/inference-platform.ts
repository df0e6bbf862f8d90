/**
 * bench:inference's and bench:batches' processes: helper processes (the provider stand-in, the
 * bare proxy) that print their URL as one JSON line, and the platform (gateway + auth + inference
 * in one process, as `npm start` runs them) sending model `llama3.2:1b` to one OpenAI-format
 * provider, with a registered account's JWT and API key. BENCH_PROFILE_DIR writes a CPU profile of
 * the platform's process there when it stops.
 */
import { ChildProcess, spawn } from "child_process";
import path from "path";
import readline from "readline";
import { ChildService, dropDatabase, freePort, spawnServices, uniqueName, waitFor } from "../test/support/platform";
import { agent } from "./inference-measure";

/** How long the platform may take to start (to register an account, to answer): minutes, not seconds, on a loaded 2-core machine. */
export const START_TIMEOUT_MS = 120_000;

export type Helper = { url: string; proc: ChildProcess; lines: readline.Interface };

/** A helper process that prints one JSON line with its URL and exits when its stdin closes. */
export function startHelper(file: string, env: Record<string, string> = {}): Promise<Helper> {
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
export async function script(standin: Pick<Helper, "proc" | "lines">, s: Record<string, unknown>) {
  await ask(standin, s);
}

/** Sends the stand-in one order; resolves with the line it answers (JSON where it answers more than "ok"). */
export async function ask(standin: Pick<Helper, "proc" | "lines">, order: Record<string, unknown>): Promise<string> {
  const answered = new Promise<string>((resolve) => standin.lines.once("line", resolve));
  standin.proc.stdin!.write(`${JSON.stringify(order)}\n`);
  return answered;
}

export type BenchPlatform = { port: number; jwt: string; apiKey: string; service: ChildService };

/** The platform in its own process, `env` added to its settings; resolves once an account is registered. */
export async function startPlatform(databaseUrl: string, providerUrl: string, env: Record<string, string> = {}): Promise<BenchPlatform> {
  const port = await freePort();
  const service = spawnServices(
    ["api-gateway", "auth", "inference"],
    {
      PORT: String(port),
      TRANSPORTER: "",
      NAMESPACE: uniqueName("bench"),
      DATABASE_URL: databaseUrl,
      OLLAMA_URL: "off",
      OPENAI_PROVIDERS: JSON.stringify([{ name: "vllm", url: providerUrl }]),
      LOG_LEVEL: "warn",
      ...env,
    },
    process.env.BENCH_PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [],
  );
  try {
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
      { timeoutMs: START_TIMEOUT_MS, intervalMs: 200, message: "a registered account" },
    );
    const apiKey = ((await (await post("/api/auth/api-keys", undefined, jwt)).json()) as { apiKey: string }).apiKey;
    return { port, jwt, apiKey, service };
  } catch (err) {
    await service.stop();
    throw err;
  }
}

/** The end of a run: the platform stopped, the helpers' stdin closed (they exit), the keep-alive sockets and the database gone. */
export async function stopAll(databaseUrl: string, platform: BenchPlatform | undefined, helpers: Helper[]): Promise<void> {
  await platform?.service.stop();
  for (const h of helpers) h.proc.stdin!.end();
  agent.destroy();
  await dropDatabase(databaseUrl).catch(() => undefined);
}

/** Runs a bench's main; a failure is printed and exits 1. */
export function runBench(main: () => Promise<void>): void {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
