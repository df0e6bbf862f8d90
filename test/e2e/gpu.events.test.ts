/**
 * GET /api/gpu/jobs/:id/events (API-DECISIONS "GPU jobs: live output and events") through the
 * gateway: gateway, auth, gpu-scheduler and a real gpu-node (process executor in the bubblewrap
 * sandbox, one simulated card) in one process; keep-alives every 300 ms instead of 15 s.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { openEventStream, statusEvents } from "../support/sse";

describe("gpu events - server-sent status events through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-events-"));

  const submit = (body: unknown) => http(base, "POST", "/api/gpu/jobs", { token: alice, body });
  const watch = (id: string, token = alice) => openEventStream(`${base}/api/gpu/jobs/${id}/events`, token);
  const watcherCount = () => (platform.broker.getLocalService("gpu-scheduler") as any).app.watch.size as number;

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: sandboxedGpuEnv(work, { RETRY_BACKOFF_S: "1", GPU_EVENTS_KEEPALIVE_MS: "300" }),
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu events - a job that completes: its detail first, then running, then completed, and the stream ends", async () => {
    const job = (await submit({ command: "sleep 1; echo done" })).body;
    const stream = await watch(job.id);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const { statuses, jobs, comments } = await statusEvents(stream);
    expect(statuses).toEqual(["queued", "running", "completed"]);
    expect(jobs[2]).toMatchObject({ id: job.id, status: "completed", result: { exitCode: 0, output: "done\n" } });
    expect(comments).toBeGreaterThan(0); // a 1 s run sees keep-alives every 300 ms
  });

  test("gpu events - a job that fails ends with failed and its exit code", async () => {
    const job = (await submit({ command: "sleep 0.5; exit 4" })).body;
    const { statuses, jobs } = await statusEvents(await watch(job.id));
    expect(statuses.slice(-2)).toEqual(["running", "failed"]);
    expect(jobs.at(-1).result.exitCode).toBe(4);
  });

  test("gpu events - a cancelled running job ends with cancelled", async () => {
    const job = (await submit({ command: "sleep 30" })).body;
    const stream = await watch(job.id);
    const first = await stream.next();
    expect(first?.event).toBe("status");
    let block = first;
    while (block?.data?.status !== "running") block = await stream.next();
    expect((await http(base, "POST", `/api/gpu/jobs/${job.id}/cancel`, { token: alice })).status).toBe(200);
    const { statuses } = await statusEvents(stream);
    expect(statuses).toEqual(["cancelled"]);
  });

  test("gpu events - a retried job shows each run: running, queued, running, then failed", async () => {
    const job = (await submit({ command: "sleep 0.5; exit 3", maxRetries: 1 })).body;
    const { statuses, jobs } = await statusEvents(await watch(job.id));
    expect(statuses).toEqual(["queued", "running", "queued", "running", "failed"]);
    expect(jobs.filter((j) => j.status === "running").map((j) => j.attempts)).toEqual([1, 2]);
  });

  test("gpu events - a finished job's stream is its detail once, then the end", async () => {
    const job = (await submit({ command: "true" })).body;
    await waitFor(async () => (await http(base, "GET", `/api/gpu/jobs/${job.id}`, { token: alice })).body.status === "completed", { message: "completed" });
    const { statuses } = await statusEvents(await watch(job.id));
    expect(statuses).toEqual(["completed"]);
  });

  test("gpu events - another account's job, and an unknown id, are 404 NOT_FOUND; nothing is left waiting", async () => {
    const job = (await submit({ command: "sleep 2" })).body;
    const bob = await gpuTestUser(base);
    for (const [id, token] of [
      [job.id, bob],
      ["7b0c1f9e-1111-4111-8111-111111111111", alice],
      ["not-a-uuid", alice],
    ]) {
      const res = await http(base, "GET", `/api/gpu/jobs/${id}/events`, { token });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("NOT_FOUND");
    }
    expect((await http(base, "GET", `/api/gpu/jobs/${job.id}/events`)).status).toBe(401);
  });

  test("gpu events - a client that leaves stops its page waits on the scheduler", async () => {
    const job = (await submit({ command: "sleep 30" })).body;
    const stream = await watch(job.id);
    await stream.next();
    await waitFor(() => watcherCount() > 0, { message: "a waiter on the scheduler" });
    stream.close();
    // The page in flight ends at its keep-alive (300 ms); no page is asked for after it.
    await waitFor(() => watcherCount() === 0, { message: "no waiter left", timeoutMs: 3000 });
    await http(base, "POST", `/api/gpu/jobs/${job.id}/cancel`, { token: alice });
  });
});
