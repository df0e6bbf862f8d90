/**
 * Retries of failed GPU jobs (`maxRetries`, API-DECISIONS "GPU jobs: controls") through the HTTP
 * gateway: gateway, auth, gpu-scheduler and a real gpu-node (process executor in the bubblewrap
 * sandbox, one simulated card) in one process, RETRY_BACKOFF_S 1 so the backoffs are short.
 * A job that fails then succeeds is covered against PostgreSQL with a fake node
 * (test/integration/gpu-scheduler.queue.test.ts): sandboxed attempts share nothing to differ by.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { MAX_JOB_ATTEMPTS } from "../../lib/job-spec";
import { gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";

describe("gpu retries - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-retries-"));

  const submit = (body: unknown) => http(base, "POST", "/api/gpu/jobs", { token: alice, body });
  const detail = (id: string) => http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice });
  const logs = (id: string, query = "") => http(base, "GET", `/api/gpu/jobs/${id}/logs${query}`, { token: alice });
  const ended = (j: any) => ["completed", "failed", "cancelled"].includes(j.status);
  const until = (id: string, accept: (job: any) => boolean, message: string) =>
    waitFor(
      async () => {
        const res = await detail(id);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs: 20_000, intervalMs: 25, message },
    );

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: sandboxedGpuEnv(work, { RETRY_BACKOFF_S: "1" }),
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test.each([
    ["11", 11],
    ["negative", -1],
    ["not an integer", 1.5],
    ["a string", "2"],
  ])("gpu retries - maxRetries %s is 400 VALIDATION_FAILED naming the field, and creates nothing", async (_name, maxRetries) => {
    const before = (await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.length;
    const res = await submit({ command: "true", maxRetries });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: any) => d.field)).toContain("maxRetries");
    expect((await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.length).toBe(before);
  });

  test("gpu retries - a job that always fails runs maxRetries + 1 attempts, each after its backoff, and every attempt's log stays readable", async () => {
    const res = await submit({ command: 'echo "run $(date +%s%N)"; exit 3', maxRetries: 2 });
    expect(res.status).toBe(201);
    const id = res.body.id;
    // Waiting for its first retry: queued, saying why and for how long.
    const waiting = await until(id, (j) => j.statusReason?.startsWith("retry 1"), "the first retry's wait");
    expect(waiting).toMatchObject({ status: "queued", attempts: 1, maxRetries: 2, statusReason: "retry 1 of 2 in 1 s after: exit code 3", result: null });
    expect(waiting.startedAt).toBeNull();
    const second = await until(id, (j) => j.statusReason?.startsWith("retry 2"), "the second retry's wait");
    expect(second).toMatchObject({ status: "queued", attempts: 2, statusReason: "retry 2 of 2 in 2 s after: exit code 3" });
    // The backoff doubled: the wait before attempt 3 is at least 2 s.
    const waitedFrom = Date.now();
    const last = await until(id, ended, "the last attempt ended");
    expect(Date.now() - waitedFrom).toBeGreaterThanOrEqual(1500);
    expect(last).toMatchObject({
      status: "failed",
      attempts: 3,
      maxRetries: 2,
      errorMessage: "Command exited with code 3",
      statusReason: "no retry after attempt 3 of 3",
      result: { exitCode: 3 },
    });

    const texts: string[] = [];
    for (const n of [1, 2, 3]) {
      const page = await logs(id, `?attempt=${n}`);
      expect(page.status).toBe(200);
      expect(page.text).toMatch(/^run \d+\n$/);
      texts.push(page.text);
    }
    expect(new Set(texts).size).toBe(3); // each attempt its own log
    expect((await logs(id)).text).toBe(texts[2]); // the last attempt by default
    expect(last.result.output).toBe(texts[2]);

    const beyond = await logs(id, "?attempt=4");
    expect(beyond.status).toBe(404);
    expect(beyond.body.error.code).toBe("NOT_FOUND");
    // Past the most attempts a job can have (retries + 1 + preemptions): not a number of one.
    for (const bad of ["0", "abc", "1.5", "-1", String(MAX_JOB_ATTEMPTS + 1)]) {
      const refused = await logs(id, `?attempt=${bad}`);
      expect(refused.status).toBe(400);
      expect(refused.body.error.code).toBe("VALIDATION_FAILED");
    }
  });

  test("gpu retries - the time limit is never retried; a job without maxRetries is not retried; a queued job has no attempt to read", async () => {
    const slow = await submit({ command: "sleep 30", timeoutSeconds: 1, maxRetries: 3 });
    const plain = await submit({ command: "exit 1" });
    const limited = await until(slow.body.id, ended, "the slow job stopped");
    expect(limited).toMatchObject({
      status: "failed",
      attempts: 1,
      maxRetries: 3,
      statusReason: "no retry after attempt 1 of 4 (the time limit is never retried)",
    });
    expect(limited.errorMessage).toContain("time limit");
    expect(await until(plain.body.id, ended, "the plain job ended")).toMatchObject({ status: "failed", attempts: 1, maxRetries: 0, statusReason: null });

    const later = await submit({ command: "true", queueTimeoutSeconds: 1, gpuType: "Test GPU" });
    expect((await detail(later.body.id)).body).toMatchObject({ attempts: expect.any(Number), maxRetries: 0 });
    await until(later.body.id, ended, "the later job ended");
    expect((await logs(later.body.id, "?attempt=2")).status).toBe(404);
  });
});
