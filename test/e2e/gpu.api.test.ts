/**
 * The GPU job API through the HTTP gateway: gateway, auth, gpu-scheduler and a real gpu-node
 * (process executor, two simulated cards) in one process on the in-process bus.
 */
import { mkdtempSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute, processAlive } from "../support/platform";

const RTX = "NVIDIA GeForce RTX 3060";
const A100 = "NVIDIA A100-SXM4-80GB";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe("gpu api - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-api-"));

  const submit = (token: string, body: unknown) => http(base, "POST", "/api/gpu/jobs", { token, body });
  const detail = (token: string, id: string) => http(base, "GET", `/api/gpu/jobs/${id}`, { token });
  const until = (token: string, id: string, accept: (job: any) => boolean, message: string, timeoutMs = 10_000) =>
    waitFor(
      async () => {
        const res = await detail(token, id);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs, intervalMs: 50, message },
    );
  const register = async (name: string) => {
    const res = await http(base, "POST", "/api/auth/register", {
      body: { email: `${name}-${Date.now()}@example.com`, name, password: "correct horse battery" },
    });
    expect(res.status).toBe(201);
    return res.body.accessToken as string;
  };

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: {
        GPU_EXECUTOR: "process",
        // These jobs report their pids through host files, which a sandboxed job cannot reach
        // (the sandbox itself: test/security/sandbox.test.ts).
        GPU_UNSAFE_UNISOLATED_JOBS: "true",
        GPU_SIMULATE: `${RTX}:12288,${A100}:81920`,
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "200",
        GPU_STOP_GRACE_S: "2",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    [alice, bob] = await Promise.all([register("alice"), register("bob")]);
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body?.cluster?.totalGpus === 2, {
      message: "two cards announced",
    });
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu api - the whole life of a job: queued, running with growing gpuSecondsUsed, completed with its result", async () => {
    const created = await submit(alice, { command: "echo hello; sleep 0.6; echo bye", gpuType: "rtx 3060" });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.stringMatching(UUID), status: "queued", queuePosition: 1 });
    const id = created.body.id;

    const running = await until(alice, id, (j) => j.status === "running", "job running");
    expect(running).toMatchObject({ id, gpuType: RTX, completedAt: null, result: null, errorMessage: null });
    expect(running.startedAt).toMatch(ISO);
    const later = await until(alice, id, (j) => j.status !== "running" || j.gpuSecondsUsed > running.gpuSecondsUsed, "gpuSecondsUsed growing");
    expect(later.gpuSecondsUsed).toBeGreaterThan(running.gpuSecondsUsed);

    const done = await until(alice, id, (j) => j.status === "completed", "job completed");
    expect(done).toMatchObject({ id, status: "completed", gpuType: RTX, errorMessage: null, result: { exitCode: 0, output: "hello\nbye\n" } });
    for (const field of ["createdAt", "startedAt", "completedAt"]) expect(done[field]).toMatch(ISO);
    expect(Date.parse(done.completedAt)).toBeGreaterThanOrEqual(Date.parse(done.startedAt));
    expect(Date.parse(done.startedAt)).toBeGreaterThanOrEqual(Date.parse(done.createdAt));
    expect(done.gpuSecondsUsed).toBeGreaterThan(0.5);
    // Finished: the figure no longer moves.
    expect((await detail(alice, id)).body.gpuSecondsUsed).toBe(done.gpuSecondsUsed);
  });

  test("gpu api - a failing command: failed, errorMessage with the exit code, result kept; logs hold the whole output", async () => {
    const script = "head -c 100000 /dev/zero | tr '\\0' x; echo; echo oops; exit 3";
    const { body } = await submit(alice, { command: script });
    const failed = await until(alice, body.id, (j) => j.status === "failed", "job failed");
    expect(failed.errorMessage).toBe("Command exited with code 3");
    expect(failed.result.exitCode).toBe(3);
    expect(failed.result.output.length).toBe(64 * 1024); // the tail only
    expect(failed.result.output.endsWith("xxx\noops\n")).toBe(true);

    const logs = await http(base, "GET", `/api/gpu/jobs/${body.id}/logs`, { token: alice });
    expect(logs.status).toBe(200);
    expect(logs.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(logs.text.length).toBe(100000 + "\noops\n".length);
    expect(logs.text.startsWith("xxxx")).toBe(true);
  });

  test("gpu api - cancel: a queued job at once, a running job stopped on its node; a finished job is 409", async () => {
    const pidFile = (n: number) => path.join(work, `pid-${n}`);
    const holders = await Promise.all([1, 2].map((n) => submit(alice, { command: `echo $$ > ${pidFile(n)}; exec sleep 30` })));
    await Promise.all(holders.map((h) => until(alice, h.body.id, (j) => j.status === "running", "holder running")));
    const queued = await submit(alice, { command: "echo never" });
    expect(queued.body.queuePosition).toBe(1);

    const cancelQueued = await http(base, "POST", `/api/gpu/jobs/${queued.body.id}/cancel`, { token: alice });
    expect(cancelQueued.status).toBe(200);
    expect(cancelQueued.body).toMatchObject({ id: queued.body.id, status: "cancelled", startedAt: null, gpuSecondsUsed: 0 });
    expect(cancelQueued.body.completedAt).toMatch(ISO);

    const pid = await waitFor(
      () => {
        try {
          return Number(readFileSync(pidFile(1), "utf8").trim()) || false;
        } catch {
          return false;
        }
      },
      { message: "pid file" },
    );
    expect(processAlive(pid)).toBe(true);
    const cancelRunning = await http(base, "POST", `/api/gpu/jobs/${holders[0].body.id}/cancel`, { token: alice });
    expect(cancelRunning.status).toBe(200);
    expect(cancelRunning.body).toMatchObject({ status: "cancelled", errorMessage: null });
    expect(cancelRunning.body.gpuSecondsUsed).toBeGreaterThan(0);
    await waitFor(() => !processAlive(pid), { message: "the cancelled job's process is gone" });
    // Its card is free again.
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body.cluster.availableGpus === 1, {
      message: "card freed",
    });
    // The node's report of the stop (its exit code) is recorded; the job stays cancelled.
    const reported = await until(alice, holders[0].body.id, (j) => j.result !== null, "the node's cancelled event applied");
    expect(reported).toMatchObject({ status: "cancelled", errorMessage: null, result: { output: "" } });

    const again = await http(base, "POST", `/api/gpu/jobs/${queued.body.id}/cancel`, { token: alice });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("INVALID_STATE");
    await http(base, "POST", `/api/gpu/jobs/${holders[1].body.id}/cancel`, { token: alice });
  });

  test("gpu api - cluster status: spec 2.5 shape with live telemetry and queueDepth", async () => {
    const res = await http(base, "GET", "/api/gpu/status", { token: alice });
    expect(res.status).toBe(200);
    const { cluster, queueDepth } = res.body;
    expect(Number.isInteger(queueDepth)).toBe(true);
    expect(cluster.totalGpus).toBe(2);
    expect(cluster.availableGpus + cluster.busyGpus).toBe(2);
    expect(cluster.gpus.map((g: any) => g.name).sort()).toEqual([A100, RTX]);
    for (const g of cluster.gpus) {
      expect(typeof g.available).toBe("boolean");
      for (const f of ["utilization", "memoryUsed", "memoryTotal", "temperature"]) expect(typeof g[f]).toBe("number");
    }
    expect(cluster.gpus.find((g: any) => g.name === A100).memoryTotal).toBe(81920);

    // The internal figures for the metrics service agree with what clients see.
    const stats = await platform.broker.call<any>("gpu-scheduler.stats");
    expect(stats.queueDepth).toBe(queueDepth);
    expect(stats.jobsByStatus).toEqual({
      queued: expect.any(Number),
      running: expect.any(Number),
      completed: expect.any(Number),
      failed: expect.any(Number),
      cancelled: expect.any(Number),
    });
    expect(stats.jobsByStatus.failed).toBeGreaterThanOrEqual(1);
    expect(stats.jobsByStatus.cancelled).toBeGreaterThanOrEqual(2);
  });

  test("gpu api - list: the caller's own jobs only, newest first, at most 50", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 52; i++) ids.push((await submit(bob, { command: "true" })).body.id);
    const bobs = await http(base, "GET", "/api/gpu/jobs", { token: bob });
    expect(bobs.status).toBe(200);
    expect(bobs.body.jobs).toHaveLength(50);
    expect(bobs.body.jobs.map((j: any) => j.id)).toEqual(ids.slice(2).reverse());
    expect(Object.keys(bobs.body.jobs[0])).toEqual(
      expect.arrayContaining(["id", "status", "gpuType", "gpuSecondsUsed", "createdAt", "startedAt", "completedAt", "result", "errorMessage"]),
    );
    const alices = await http(base, "GET", "/api/gpu/jobs", { token: alice });
    expect(alices.body.jobs.length).toBeGreaterThan(0);
    expect(alices.body.jobs.some((j: any) => ids.includes(j.id))).toBe(false);
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: bob })).body.queueDepth === 0, {
      timeoutMs: 20_000,
      message: "bob's jobs drained",
    });
  });

  test("gpu api - another account's job is 404 everywhere, like a job that does not exist", async () => {
    const { body } = await submit(alice, { command: "echo private" });
    for (const [method, suffix] of [
      ["GET", ""],
      ["POST", "/cancel"],
      ["GET", "/logs"],
    ] as const) {
      for (const id of [body.id, "7d5d4f3e-1111-4222-8333-944455556666", "not-a-uuid"]) {
        const res = await http(base, method, `/api/gpu/jobs/${id}${suffix}`, { token: bob });
        expect([res.status, res.body]).toEqual([404, { error: { code: "NOT_FOUND", message: "GPU job not found", details: null } }]);
      }
    }
    expect((await detail(alice, body.id)).body.status).not.toBe("cancelled");
  });

  test.each([
    ["missing command", {}, "command"],
    ["empty command", { command: "" }, "command"],
    ["blank command", { command: "   " }, "command"],
    ["command not a string", { command: 5 }, "command"],
    ["command null", { command: null }, "command"],
    ["command an array", { command: ["ls"] }, "command"],
    ["command over 64 KiB", { command: "x".repeat(64 * 1024 + 1) }, "command"],
    ["gpuType not a string", { command: "ls", gpuType: 3060 }, "gpuType"],
    ["gpuType empty", { command: "ls", gpuType: "" }, "gpuType"],
    ["gpuType no card has", { command: "ls", gpuType: "H100" }, "gpuType"],
    ["containerImage with spaces", { command: "ls", containerImage: "bad image" }, "containerImage"],
    ["containerImage not a string", { command: "ls", containerImage: {} }, "containerImage"],
  ])("gpu api - bad body: %s is 400 VALIDATION_FAILED and creates nothing", async (_name, body, field) => {
    const before = (await http(base, "GET", "/api/gpu/jobs", { token: bob })).body.jobs[0]?.id;
    const res = await submit(bob, body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: any) => d.field)).toContain(field);
    if (field === "gpuType" && (body as any).gpuType === "H100") {
      expect(res.body.error.details[0].knownTypes).toEqual([A100, RTX].sort());
      expect(res.body.error.details[0].message).toContain(RTX);
    }
    expect((await http(base, "GET", "/api/gpu/jobs", { token: bob })).body.jobs[0]?.id).toBe(before);
  });

  test("gpu api - a body that is not JSON is refused and creates nothing", async () => {
    const broken = await http(base, "POST", "/api/gpu/jobs", { token: bob, rawBody: "{command:", headers: { "content-type": "application/json" } });
    expect([broken.status, broken.body.error.code]).toEqual([400, "INVALID_JSON"]);
    const text = await http(base, "POST", "/api/gpu/jobs", { token: bob, rawBody: "command=ls", headers: { "content-type": "text/plain" } });
    expect(text.status).toBe(415);
  });

  test("gpu api - without credentials every endpoint is 401", async () => {
    const id = "7d5d4f3e-1111-4222-8333-944455556666";
    for (const [method, url] of [
      ["POST", "/api/gpu/jobs"],
      ["GET", "/api/gpu/jobs"],
      ["GET", `/api/gpu/jobs/${id}`],
      ["POST", `/api/gpu/jobs/${id}/cancel`],
      ["GET", `/api/gpu/jobs/${id}/logs`],
      ["GET", "/api/gpu/status"],
    ]) {
      const res = await http(base, method, url, method === "POST" ? { body: { command: "ls" } } : {});
      expect([url, res.status, res.body?.error?.code]).toEqual([url, 401, "UNAUTHORIZED"]);
    }
  });

  test("gpu api - a job submitted with an API key runs like one submitted with a JWT", async () => {
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: alice })).body.apiKey;
    const res = await http(base, "POST", "/api/gpu/jobs", { headers: { "x-api-key": key }, body: { command: "echo key", gpuType: "A100" } });
    expect(res.status).toBe(201);
    const done = await until(alice, res.body.id, (j) => j.status === "completed", "api-key job completed");
    expect(done).toMatchObject({ gpuType: A100, result: { exitCode: 0, output: "key\n" } });
  });

  test("gpu api - cluster status names each node by an opaque label, never by its node id (a host name)", async () => {
    const res = await http(base, "GET", "/api/gpu/status", { token: alice });
    expect(res.status).toBe(200);
    const labels = new Set(res.body.cluster.gpus.map((g: any) => g.nodeId));
    expect(labels.size).toBe(1); // both cards sit on the one gpu-node of this platform
    expect([...labels][0]).toMatch(/^node-[0-9a-f]{8}$/);
    expect(res.text).not.toContain(platform.broker.nodeID);
    // Stable: the next answer gives the same label.
    expect((await http(base, "GET", "/api/gpu/status", { token: alice })).body.cluster.gpus[0].nodeId).toBe([...labels][0]);
  });

  test('gpu api - a job command "echo \\u0000" is 400 for its sender while 19 concurrent submissions beside it are all created', async () => {
    const bad = submit(bob, { command: "echo \u0000" });
    const good = Array.from({ length: 19 }, (_, i) => submit(alice, { command: `echo beside ${i}` }));
    const [badRes, ...goodRes] = await Promise.all([bad, ...good]);
    expect(badRes.status).toBe(400);
    expect(badRes.body.error).toMatchObject({ code: "VALIDATION_FAILED", details: [expect.objectContaining({ field: "command" })] });
    expect(goodRes.map((r) => r.status)).toEqual(Array(19).fill(201));
    // Let them finish so nothing outlives the test.
    await waitFor(
      async () => {
        for (const r of goodRes) if (!["completed", "failed", "cancelled"].includes((await detail(alice, r.body.id)).body.status)) return false;
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 200, message: "the 19 jobs finished" },
    );
  });
});
