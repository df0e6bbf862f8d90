/**
 * GET /api/gpu/jobs/:id/logs?follow=true (API-DECISIONS "GPU jobs: live output and events")
 * through the gateway, with a real gpu-node running sandboxed processes on one simulated card
 * (all in one process). The page wait is long (20 s) so a test sees the stop, not its end.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { followLog } from "../support/follow";

describe("gpu follow - live job output through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-follow-"));

  const submit = async (body: unknown) => (await http(base, "POST", "/api/gpu/jobs", { token: alice, body })).body.id as string;
  const detail = async (id: string) => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice })).body;
  const follow = (id: string, query = "") => followLog(`${base}/api/gpu/jobs/${id}/logs?follow=true${query}`, alice);
  const followers = () => (platform.broker.getLocalService("gpu-node") as any).node.logs.followers;

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: sandboxedGpuEnv(work, { RETRY_BACKOFF_S: "1", GPU_FOLLOW_WAIT_MS: "20000" }),
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu follow - lines arrive while the job runs, and the body ends with all of its output once it has ended", async () => {
    const id = await submit({ command: "for i in 1 2 3 4; do echo line $i; sleep 0.5; done" });
    const log = await follow(id);
    expect(log.response.status).toBe(200);
    expect(log.response.headers.get("content-type")).toMatch(/^text\/plain/);
    const first = await log.until((text) => text.includes("line 1\n"));
    // The first line came while the job was still running: live, not at the end. (The node's
    // "running" report travels on its own: the line can overtake it, the job then still reads queued.)
    expect(first).not.toContain("line 4");
    expect(["queued", "running"]).toContain((await detail(id)).status);
    const text = await log.rest();
    expect(text).toBe("line 1\nline 2\nline 3\nline 4\n");
    expect((await detail(id)).status).toBe("completed");
  });

  test("gpu follow - a queued job's follow waits for it to start, then streams it", async () => {
    const holder = await submit({ command: "sleep 30" });
    await waitFor(async () => (await detail(holder)).status === "running", { message: "the holder running" });
    const id = await submit({ command: "echo queued then ran" });
    const log = await follow(id);
    expect(log.response.status).toBe(200);
    expect((await detail(id)).status).toBe("queued");
    await http(base, "POST", `/api/gpu/jobs/${holder}/cancel`, { token: alice });
    expect(await log.rest()).toBe("queued then ran\n");
  });

  test("gpu follow - a retried job's next attempt follows the failed one", async () => {
    const id = await submit({ command: 'echo "attempt output"; sleep 0.3; exit 3', maxRetries: 1 });
    const text = await (await follow(id)).rest();
    expect(text).toBe("attempt output\nattempt output\n");
    expect(await detail(id)).toMatchObject({ status: "failed", attempts: 2 });
  });

  test("gpu follow - a finished job's follow is its whole output at once", async () => {
    const id = await submit({ command: "echo finished" });
    await waitFor(async () => (await detail(id)).status === "completed", { message: "completed" });
    expect(await (await follow(id)).rest()).toBe("finished\n");
  });

  test("gpu follow - the client leaving ends the node's wait at once, and no page is asked for after", async () => {
    const id = await submit({ command: "echo started; sleep 30" });
    const log = await follow(id);
    await log.until((text) => text.includes("started\n"));
    await waitFor(() => followers().waiting === 1, { message: "the node waiting for output" });
    log.close();
    // Far sooner than the page's own 20 s bound: followStop reached the node.
    await waitFor(() => followers().waiting === 0, { message: "the node's wait ended", timeoutMs: 3000 });
    const served = followers().served;
    await http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token: alice });
    await waitFor(async () => (await detail(id)).status === "cancelled", { message: "cancelled" });
    expect(followers().served).toBe(served);
    expect(followers().waiting).toBe(0);
  });

  test("gpu follow - bad input is 400, another account's job and an attempt not started are 404", async () => {
    const id = await submit({ command: "sleep 2" });
    const bob = await gpuTestUser(base);
    const cases: Array<[string, string, number, string]> = [
      [`/api/gpu/jobs/${id}/logs?follow=maybe`, alice, 400, "VALIDATION_FAILED"],
      [`/api/gpu/jobs/${id}/logs?follow=true`, bob, 404, "NOT_FOUND"],
      [`/api/gpu/jobs/${id}/logs?follow=true&attempt=2`, alice, 404, "NOT_FOUND"],
      [`/api/gpu/jobs/not-a-job/logs?follow=true`, alice, 404, "NOT_FOUND"],
    ];
    for (const [url, token, status, code] of cases) {
      const res = await http(base, "GET", url, { token });
      expect([url, res.status, res.body?.error?.code]).toEqual([url, status, code]);
    }
    await http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token: alice });
  });
});
