/**
 * What the image runs: `npm run build`'s compiled JS started as `node dist/index.js` in production
 * mode. It serves the API and the reference page (assets found from the compiled location),
 * answers its probes and metrics, logs JSON lines, and exits 0 on SIGTERM.
 */
import { ChildProcess, spawn, spawnSync } from "child_process";
import fs from "fs";
import path from "path";
import { generateCallerKeyPair } from "../../lib/caller-token";
import { dropDatabase, http, ROOT, testDatabaseUrl, uniqueName, waitFor, freePort } from "../support/platform";

describe("ops - the compiled entry point the image runs", () => {
  // Inside dist/ (ignored), so the compiled files resolve node_modules and package.json as in /app.
  const outDir = path.join(ROOT, "dist", uniqueName(".ops-test"));
  const databaseUrl = testDatabaseUrl();
  let proc: ChildProcess | undefined;
  let output = "";

  afterAll(async () => {
    if (proc && proc.exitCode === null) proc.kill("SIGKILL");
    fs.rmSync(outDir, { recursive: true, force: true });
    await dropDatabase(databaseUrl).catch(() => undefined);
  });

  it("ops - node dist/index.js serves, probes, logs JSON and drains on SIGTERM", async () => {
    const build = spawnSync(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", outDir], {
      cwd: ROOT,
      encoding: "utf8",
    });
    expect(build.stdout + build.stderr).toBe("");
    expect(build.status).toBe(0);

    const [port, healthPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    proc = spawn(process.execPath, [path.join(outDir, "index.js")], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        NODE_ENV: "production",
        SERVICES: "api-gateway,auth",
        JWT_SECRET: "image-test-secret",
        // Production needs the caller-token key (the verify key is derived from it in this process).
        CALLER_SIGNING_KEY: generateCallerKeyPair().signingKey,
        DATABASE_URL: databaseUrl,
        NAMESPACE: uniqueName("t"),
        SCRYPT_LOG_N: "14",
        PORT: String(port),
        HEALTH_PORT: String(healthPort),
        METRICS_PORT: String(metricsPort),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout!.on("data", (d) => (output += d));
    proc.stderr!.on("data", (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => proc!.once("exit", (code) => resolve(code)));

    const base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await http(`http://127.0.0.1:${healthPort}`, "GET", "/ready")).status === 200, {
      timeoutMs: 30_000,
      message: `compiled process ready (output: ${output.slice(-500)})`,
    });
    const reg = await http(base, "POST", "/api/auth/register", {
      body: { email: `image-${Date.now()}@example.com`, name: "Image", password: "a long password" },
      headers: { "x-request-id": "image-test-1" },
    });
    expect(reg.status).toBe(201);
    const doc = await http(base, "GET", "/api/openapi.json");
    expect(doc.status).toBe(200);
    expect(doc.body.info.version).toBe(JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).version);
    expect(Object.keys(doc.body.paths)).toContain("/api/auth/register");
    const css = await fetch(`${base}/api/docs/swagger-ui.css`);
    expect(css.status).toBe(200);
    expect((await css.text()).length).toBeGreaterThan(10_000);
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^moleculer_request_total\{.*action="auth\.register".*\} 1$/m);

    proc.kill("SIGTERM");
    expect(await exited).toBe(0);
    // Production logs are JSON lines; the request's lines carry its id.
    const lines = output
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.find((l) => l.requestId === "image-test-1" && l.message === "request")).toMatchObject({ status: 201, path: "/api/auth/register" });
    expect(lines.some((l) => /SIGTERM received/.test(l.message))).toBe(true);
  });
});
