/**
 * The job controls of POST /api/gpu/jobs (API-DECISIONS "GPU jobs: controls") through the HTTP
 * gateway: gateway, auth, gpu-scheduler and a real gpu-node (process executor in the bubblewrap
 * sandbox, one simulated card) in one process; every platform log line is captured (debug level).
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const CARD = "Test GPU";

describe("gpu controls - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-controls-"));
  const logLines: string[] = [];

  const submit = (body: unknown) => http(base, "POST", "/api/gpu/jobs", { token: alice, body });
  const detail = (id: string) => http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice });
  const until = (id: string, accept: (job: any) => boolean, message: string, timeoutMs = 15_000) =>
    waitFor(
      async () => {
        const res = await detail(id);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs, intervalMs: 50, message },
    );
  const ended = (j: any) => ["completed", "failed", "cancelled"].includes(j.status);

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const)
      jest.spyOn(console, method).mockImplementation((...args: unknown[]) => void logLines.push(args.map(String).join(" ")));
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: {
        LOG_LEVEL: "debug",
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: `${CARD}:1024`,
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    const res = await http(base, "POST", "/api/auth/register", {
      body: { email: `alice-${Date.now()}@example.com`, name: "alice", password: "correct horse battery" },
    });
    alice = res.body.accessToken;
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body?.cluster?.totalGpus === 1, {
      message: "the card announced",
    });
  });

  afterAll(async () => {
    await platform?.stop(); // the console stays captured: lines logged while the last timers end go nowhere
    rmSync(work, { recursive: true, force: true });
  });

  test.each([
    ["timeoutSeconds 0", { timeoutSeconds: 0 }, "timeoutSeconds"],
    ["timeoutSeconds over a week", { timeoutSeconds: 604801 }, "timeoutSeconds"],
    ["timeoutSeconds not an integer", { timeoutSeconds: 1.5 }, "timeoutSeconds"],
    ["timeoutSeconds a string", { timeoutSeconds: "60" }, "timeoutSeconds"],
    ["timeoutSeconds negative", { timeoutSeconds: -1 }, "timeoutSeconds"],
    ["env an array", { env: ["A=1"] }, "env"],
    ["env a string", { env: "A=1" }, "env"],
    ["env with 65 variables", { env: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, "x"])) }, "env"],
    ["env name starting with a digit", { env: { "1A": "x" } }, "env"],
    ["env name with a dash", { env: { "A-B": "x" } }, "env"],
    ["env name empty", { env: { "": "x" } }, "env"],
    ["env name over 128 characters", { env: { ["A".repeat(129)]: "x" } }, "env"],
    ["env name NVIDIA_*", { env: { NVIDIA_VISIBLE_DEVICES: "all" } }, "env"],
    ["env name CUDA_*", { env: { CUDA_VISIBLE_DEVICES: "0" } }, "env"],
    ["env name cuda_* in lower case", { env: { cuda_visible_devices: "0" } }, "env"],
    ["env value a number", { env: { A: 1 } }, "env"],
    ["env value null", { env: { A: null } }, "env"],
    ["env value an object", { env: { A: {} } }, "env"],
    ["queueTimeoutSeconds 0", { queueTimeoutSeconds: 0 }, "queueTimeoutSeconds"],
    ["queueTimeoutSeconds over a week", { queueTimeoutSeconds: 604801 }, "queueTimeoutSeconds"],
    ["queueTimeoutSeconds not an integer", { queueTimeoutSeconds: 2.5 }, "queueTimeoutSeconds"],
    ["queueTimeoutSeconds a string", { queueTimeoutSeconds: "5" }, "queueTimeoutSeconds"],
    ["env value over 4096 characters", { env: { A: "x".repeat(4097) } }, "env"],
  ])("gpu controls - bad body: %s is 400 VALIDATION_FAILED naming the field, and creates nothing", async (_name, extra, field) => {
    const before = (await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.map((j: any) => j.id);
    const res = await submit({ command: "echo never", ...extra });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: any) => d.field)).toContain(field);
    expect(res.text).not.toContain("xxxx"); // a refused value is not echoed
    expect((await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.map((j: any) => j.id)).toEqual(before);
  });

  test('gpu controls - timeoutSeconds: echoed (JOB_TIMEOUT_S by default); a job over its limit is stopped and failed with "time limit"', async () => {
    const plain = await submit({ command: "true" });
    expect(plain.status).toBe(201);
    expect((await until(plain.body.id, ended, "default job ended")).timeoutSeconds).toBe(3600);

    const slow = await submit({ command: "echo started; sleep 30", timeoutSeconds: 1 });
    expect(slow.status).toBe(201);
    expect((await detail(slow.body.id)).body.timeoutSeconds).toBe(1);
    const failed = await until(slow.body.id, ended, "the slow job stopped");
    expect(failed).toMatchObject({ status: "failed", timeoutSeconds: 1, result: { output: "started\n" } });
    expect(failed.errorMessage).toContain("time limit");
    // Stopped at its limit (plus the grace), not after its 30 s.
    expect(Date.parse(failed.completedAt) - Date.parse(failed.startedAt)).toBeLessThan(10_000);
  });

  test("gpu controls - env: the job's process sees each variable exactly; responses show the names only, and no log line a value", async () => {
    const secret = `s3cr3t-${Date.now()}`;
    const env = { ZED_TOKEN: secret, A_SPACED: "two  words; $HOME 'quoted'", EMPTY: "" };
    // The job shows the secret only spelled out (s.3.c…), so the value itself must never appear anywhere.
    const command = `printf '%s|%s|%s|' "$A_SPACED" "\${EMPTY-unset}" "$CUDA_VISIBLE_DEVICES"; printf '%s' "$ZED_TOKEN" | sed 's/./&./g'`;
    const res = await submit({ command, env });
    expect(res.status).toBe(201);
    const done = await until(res.body.id, ended, "env job ended");
    expect(done).toMatchObject({ status: "completed", envNames: ["A_SPACED", "EMPTY", "ZED_TOKEN"] });
    expect(done.result.output).toMatch(/^two {2}words; \$HOME 'quoted'\|\|GPU-\S+\|/);
    expect(done.result.output.split("|")[3]).toBe(secret.replace(/./g, "$&."));
    const answers = [
      res,
      await detail(res.body.id),
      await http(base, "GET", "/api/gpu/jobs", { token: alice }),
      await http(base, "POST", `/api/gpu/jobs/${res.body.id}/cancel`, { token: alice }), // 409: already ended
      await http(base, "GET", `/api/gpu/jobs/${res.body.id}/logs`, { token: alice }),
    ];
    expect(answers[2].body.jobs.find((j: any) => j.id === res.body.id).envNames).toEqual(["A_SPACED", "EMPTY", "ZED_TOKEN"]);
    for (const answer of answers) expect(answer.text).not.toContain(secret);
    // No line the platform logged (at debug) holds the value (the job's own output, which it printed spelled out, may be).
    expect(logLines.join("\n")).toContain(res.body.id); // the capture works: debug lines name the job
    expect(logLines.filter((line) => line.includes(secret))).toEqual([]);
    // A job without env lists no names.
    const plain = await submit({ command: "true" });
    expect((await detail(plain.body.id)).body.envNames).toEqual([]);
  });

  test('gpu controls - queueTimeoutSeconds: a job still queued after it is cancelled with statusReason "expired"; one that started is not', async () => {
    // The one card is busy, so the next job waits.
    const holder = await submit({ command: "sleep 30", queueTimeoutSeconds: 5 });
    await until(holder.body.id, (j) => j.status === "running", "holder running");
    const waiting = await submit({ command: "echo never", queueTimeoutSeconds: 1 });
    expect(waiting.status).toBe(201);
    expect((await detail(waiting.body.id)).body).toMatchObject({ status: "queued", queueTimeoutSeconds: 1, statusReason: "waiting for a free GPU" });
    const expired = await until(waiting.body.id, ended, "the waiting job expired");
    expect(expired).toMatchObject({ status: "cancelled", startedAt: null, result: null, errorMessage: null, queueTimeoutSeconds: 1 });
    expect(expired.statusReason).toContain("expired");
    expect(Date.parse(expired.completedAt) - Date.parse(expired.createdAt)).toBeGreaterThanOrEqual(1000);
    // The holder started within its own queue timeout: still running, no reason.
    expect((await detail(holder.body.id)).body).toMatchObject({ status: "running", queueTimeoutSeconds: 5, statusReason: null });
    const cancelled = await http(base, "POST", `/api/gpu/jobs/${holder.body.id}/cancel`, { token: alice });
    expect(cancelled.body).toMatchObject({ status: "cancelled", statusReason: null, queueTimeoutSeconds: 5 });
    await until(holder.body.id, (j) => j.result !== null, "the holder stopped on its node");
  });
});
