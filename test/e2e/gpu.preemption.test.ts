/**
 * Preemptible jobs and schedules (issue 30) through the HTTP gateway: gateway, auth, gpu-scheduler
 * and a real gpu-node (process executor in the bubblewrap sandbox, one simulated card) in one
 * process. A preemptible job is displaced by an ordinary one and resumed with its retries intact;
 * the schedule routes refuse bad input and other accounts; a due tick makes a job that names its schedule.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";
import { gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";

describe("gpu preemption and schedules - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-preempt-"));

  const detail = (id: string, token = alice) => http(base, "GET", `/api/gpu/jobs/${id}`, { token });
  const until = (id: string, accept: (job: any) => boolean, message: string, token = alice) =>
    waitFor(
      async () => {
        const res = await detail(id, token);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs: 30_000, intervalMs: 50, message },
    );

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: sandboxedGpuEnv(work, { GPU_PREEMPT_GRACE_S: "1" }),
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base);
    bob = await gpuTestUser(base);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu preemption - a waiting job displaces a preemptible one, which is queued again (preemptions 1, retries untouched) and runs after it", async () => {
    const cheap = await http(base, "POST", "/api/gpu/jobs", {
      token: alice,
      body: { command: "echo cheap-$(date +%s%N); sleep 60", preemptible: true, maxRetries: 1 },
    });
    expect(cheap.status).toBe(201);
    await until(cheap.body.id, (j) => j.status === "running", "the preemptible job running");
    const urgent = await http(base, "POST", "/api/gpu/jobs", { token: bob, body: { command: "echo urgent" } });
    expect(urgent.status).toBe(201);
    const displaced = await until(cheap.body.id, (j) => j.preemptions === 1, "the preemptible job preempted");
    expect(["queued", "running"]).toContain(displaced.status);
    // Queued again after its first attempt; or already placed again (the urgent job, an echo, can be
    // done by the time this is read; a placed job not started yet still shows as queued): its second
    // attempt. Its one retry is untouched either way (below: it runs again with preemptions 1).
    expect(displaced).toMatchObject({ preemptible: true, maxRetries: 1 });
    expect([1, 2]).toContain(displaced.attempts);
    const done = await until(urgent.body.id, (j) => j.status === "completed", "the urgent job completed", bob);
    expect(done.result.output).toContain("urgent");
    // Back on the card once it is free: its second attempt, no retry spent.
    const resumed = await until(cheap.body.id, (j) => j.status === "running" && j.attempts === 2, "the preemptible job resumed");
    expect(resumed).toMatchObject({ preemptions: 1, statusReason: null });
    const first = await http(base, "GET", `/api/gpu/jobs/${cheap.body.id}/logs?attempt=1`, { token: alice });
    expect(first.text).toContain("cheap-");
    expect((await http(base, "POST", `/api/gpu/jobs/${cheap.body.id}/cancel`, { token: alice })).status).toBe(200);
  });

  test.each([
    ["a cron of 4 fields", { cron: "* * * *" }, "cron"],
    ["a minute of 61", { cron: "61 * * * *" }, "cron"],
    ["an unknown time zone", { timezone: "Mars/Base" }, "timezone"],
    ["a blank command", { job: { command: "  " } }, "job.command"],
    ["a bad concurrency", { concurrency: "sometimes" }, "concurrency"],
    ["an unknown field", { every: "day" }, "every"],
    // A tick makes one job: no array, nothing to wait for, never a deployment's replica.
    ["an array", { job: { command: "true", arrayCount: 3 } }, "job.arrayCount"],
    ["a dependency", { job: { command: "true", dependsOn: [{ jobId: "4b6f1c2e-0000-4000-8000-000000000001", condition: "finished" }] } }, "job.dependsOn"],
    ["a deployment's id", { job: { command: "true", deploymentId: "4b6f1c2e-0000-4000-8000-000000000001" } }, "job.deploymentId"],
    ["a serve port", { job: { command: "true", servePort: 8000 } }, "job.servePort"],
  ])("gpu schedules - %s is 400 naming the field, and creates nothing", async (_name, change, field) => {
    const res = await http(base, "POST", "/api/gpu/schedules", { token: alice, body: { name: "n", cron: "0 3 * * *", job: { command: "true" }, ...change } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body.error.details)).toContain(field);
    expect((await http(base, "GET", "/api/gpu/schedules", { token: alice })).body.schedules.filter((s: any) => s.name === "n")).toEqual([]);
  });

  test("gpu schedules - create, read, pause, another account's 404, a due tick's job names its schedule, delete", async () => {
    const created = await http(base, "POST", "/api/gpu/schedules", {
      token: alice,
      body: { name: "nightly", cron: "30 2 * * *", timezone: "Europe/Berlin", job: { command: "echo tick", env: { TOKEN: "secret" } } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(created.body).toMatchObject({ name: "nightly", concurrency: "forbid", paused: false, skipped: 0, lastJobId: null, envNames: ["TOKEN"] });
    expect(JSON.stringify(created.body)).not.toContain("secret");
    expect(new Date(created.body.nextRunAt).getTime()).toBeGreaterThan(Date.now());
    for (const [method, p, body] of [
      ["GET", `/api/gpu/schedules/${id}`, undefined],
      ["PATCH", `/api/gpu/schedules/${id}`, { paused: true }],
      ["DELETE", `/api/gpu/schedules/${id}`, undefined],
    ] as const)
      expect((await http(base, method, p, { token: bob, body })).status).toBe(404);
    const paused = await http(base, "PATCH", `/api/gpu/schedules/${id}`, { token: alice, body: { paused: true } });
    expect(paused.body).toMatchObject({ paused: true, nextRunAt: null });
    const resumed = await http(base, "PATCH", `/api/gpu/schedules/${id}`, { token: alice, body: { paused: false, cron: "*/5 * * * *" } });
    expect(resumed.body).toMatchObject({ paused: false, cron: "*/5 * * * *" });
    // Make the tick due now (as a restart after its time would find it) and let the scheduler run it.
    const db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
    await db.query(`UPDATE gpu_scheduler.schedules SET next_run_at = now() - interval '1 hour' WHERE id = $1`, [id]);
    await db.end();
    const ticked = await waitFor(
      async () => {
        const s = (await http(base, "GET", `/api/gpu/schedules/${id}`, { token: alice })).body;
        return s.lastJobId ? s : false;
      },
      { timeoutMs: 15_000, message: "the tick's job" },
    );
    expect(ticked.runs).toBe(1);
    const job = (await detail(ticked.lastJobId)).body;
    expect(job).toMatchObject({ scheduleId: id, command: "echo tick", envNames: ["TOKEN"] });
    expect((await http(base, "DELETE", `/api/gpu/schedules/${id}`, { token: alice })).status).toBe(200);
    expect((await http(base, "GET", `/api/gpu/schedules/${id}`, { token: alice })).status).toBe(404);
    expect((await detail(ticked.lastJobId)).status).toBe(200);
  });
});
