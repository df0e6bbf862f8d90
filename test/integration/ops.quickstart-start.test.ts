/**
 * The quick start's last step (the `exec` line of scripts/quickstart.sh, run as the script runs
 * it) with PORT alone: health and metrics follow PORT, the model providers are named with whether
 * each answers, SIGTERM and SIGINT leave nothing serving, and a port in use is one line naming
 * the variable.
 */
import { ChildProcess, spawn } from "child_process";
import { readFileSync } from "fs";
import net from "net";
import path from "path";
import { dropDatabase, freePort, ROOT, testDatabaseUrl, waitFor } from "../support/platform";

const START_LINE = /^exec (.+)$/m.exec(readFileSync(path.join(ROOT, "scripts/quickstart.sh"), "utf8"))![1];

type Started = { proc: ChildProcess; output: () => string; exited: Promise<number | null> };

function start(port: number, databaseUrl: string): Started {
  // Only what the quick start's environment holds, and no HEALTH_PORT or METRICS_PORT.
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    PORT: String(port),
    DATABASE_URL: databaseUrl,
    SERVICES: "api-gateway,auth,inference",
    OLLAMA_URL: "http://127.0.0.1:9", // nothing answers there
    LOG_LEVEL: "info",
  };
  const proc = spawn("bash", ["-c", `exec ${START_LINE}`], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  proc.stdout!.on("data", (d) => (output += d));
  proc.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return { proc, output: () => output, exited };
}

const answers = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });

describe("ops quickstart - PORT alone, a clean stop, the providers named", () => {
  const databaseUrl = testDatabaseUrl();
  afterAll(() => dropDatabase(databaseUrl).catch(() => undefined));

  test.each(["SIGTERM", "SIGINT"] as const)("ops quickstart - started with PORT alone, stopped by %s: nothing left serving", async (signal) => {
    const port = await freePort();
    const run = start(port, databaseUrl);
    try {
      await waitFor(() => /ready: /.test(run.output()), { message: "the ready line", timeoutMs: 45_000 });
      expect(await answers(port)).toBe(true);
      const live = await fetch(`http://127.0.0.1:${port + 1}/live`);
      expect(live.status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port + 30}/metrics`)).status).toBe(200);
      await waitFor(() => /Model providers: ollama \(http:\/\/127\.0\.0\.1:9\) does not answer/.test(run.output()), { message: "the providers line" });
      expect(run.output()).toContain("ollama pull");
      expect(run.output()).toContain("OPENAI_PROVIDERS");
      run.proc.kill(signal);
      expect(await run.exited).toBe(0);
      expect(await answers(port)).toBe(false);
      expect(await answers(port + 1)).toBe(false);
      expect(await answers(port + 30)).toBe(false);
    } finally {
      run.proc.kill("SIGKILL");
    }
  });

  test("ops quickstart - a port in use stops it with one line naming the variable, no stack trace", async () => {
    const port = await freePort();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(port + 30, resolve));
    try {
      const run = start(port, databaseUrl);
      expect(await run.exited).toBe(1);
      expect(run.output().trim()).toBe(
        `Failed to start: METRICS_PORT=${port + 30} is in use by another program: set METRICS_PORT to a free port (0: any free one)`,
      );
    } finally {
      blocker.close();
    }
  });
});
