/**
 * Job arrays and dependencies (issue 30, API-DECISIONS "GPU jobs: arrays, dependencies, schedules,
 * preemption") through the HTTP gateway: gateway, auth, gpu-scheduler and a real gpu-node (process
 * executor in the bubblewrap sandbox, 4 simulated cards) in one process.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";

const CARDS = 4;

describe("gpu batch - arrays and dependencies through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-batch-"));

  const submit = (body: unknown, token = alice) => http(base, "POST", "/api/gpu/jobs", { token, body });
  const detail = (id: string, token = alice) => http(base, "GET", `/api/gpu/jobs/${id}`, { token });
  const arrayOf = (id: string, token = alice) => http(base, "GET", `/api/gpu/arrays/${id}`, { token });
  const ended = (j: any) => ["completed", "failed", "cancelled"].includes(j.status);
  const until = (id: string, accept: (job: any) => boolean, message: string) =>
    waitFor(
      async () => {
        const res = await detail(id);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs: 30_000, intervalMs: 25, message },
    );

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: sandboxedGpuEnv(work, { GPU_SIMULATE: Array.from({ length: CARDS }, () => "Test GPU:1024").join(","), QUOTA_QUEUED_JOBS: "60" }),
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base, CARDS);
    bob = await gpuTestUser(base, CARDS);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu batch - an array of 12 with parallelism 2 runs every job once, with its index, never more than 2 at a time, counts exact", async () => {
    const res = await submit({ command: 'echo "i=$CI_ARRAY_INDEX a=$CI_ARRAY_ID"; sleep 0.2', arrayCount: 12, arrayParallelism: 2 });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ arrayId: expect.any(String), jobIds: expect.any(Array), status: "queued" });
    const { arrayId, jobIds } = res.body;
    expect(jobIds).toHaveLength(12);
    const done = await waitFor(
      async () => {
        const a = (await arrayOf(arrayId)).body;
        return a.counts.completed === 12 ? a : false;
      },
      { timeoutMs: 60_000, intervalMs: 100, message: "every job of the array completed" },
    );
    expect(done).toEqual({ id: arrayId, total: 12, counts: { completed: 12 }, jobIds });
    const jobs = await Promise.all(jobIds.map(async (id: string) => (await detail(id)).body));
    jobs.forEach((j: any, i: number) => {
      expect(j).toMatchObject({ arrayId, arrayIndex: i, arrayCount: 12, arrayParallelism: 2 });
      expect(j.result.output).toContain(`i=${i} a=${arrayId}`);
    });
    // At no start of a job were 2 others of the array running.
    for (const j of jobs) {
      const start = Date.parse(j.startedAt);
      const overlapping = jobs.filter((o: any) => o !== j && Date.parse(o.startedAt) <= start && Date.parse(o.completedAt) > start);
      expect(overlapping.length).toBeLessThan(2);
    }
  });

  test("gpu batch - an array with an Idempotency-Key is created once: the replay answers the same array, a different body is 422", async () => {
    const key = `sweep-${Date.now()}`;
    const body = { command: "true", arrayCount: 5 };
    const post = (b: unknown) => http(base, "POST", "/api/gpu/jobs", { token: alice, body: b, headers: { "Idempotency-Key": key } });
    const [first, second] = await Promise.all([post(body), post(body)]);
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body).toEqual(first.body);
    expect([first.headers.get("idempotent-replayed"), second.headers.get("idempotent-replayed")].sort()).toEqual(["true", null].sort());
    expect((await arrayOf(first.body.arrayId)).body.total).toBe(5);
    expect((await post({ ...body, arrayCount: 6 })).status).toBe(422);
  });

  test("gpu batch - cancelling an array cancels its unfinished jobs; another account's array is 404", async () => {
    const res = await submit({ command: "sleep 30", arrayCount: 6 });
    const { arrayId, jobIds } = res.body;
    expect((await arrayOf(arrayId, bob)).status).toBe(404);
    expect((await http(base, "POST", `/api/gpu/arrays/${arrayId}/cancel`, { token: bob })).status).toBe(404);
    await waitFor(async () => ((await arrayOf(arrayId)).body.counts.running ?? 0) >= 1, { message: "a job of the array runs" });
    const cancelled = await http(base, "POST", `/api/gpu/arrays/${arrayId}/cancel`, { token: alice });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: arrayId, total: 6, counts: { cancelled: 6 }, jobIds });
    expect((await detail(jobIds[5])).body).toMatchObject({ status: "cancelled", statusReason: "the array was cancelled" });
  });

  test("gpu batch - a restricted token with jobs:read reads an array but cannot cancel it or submit one", async () => {
    const { arrayId } = (await submit({ command: "true", arrayCount: 2 })).body;
    const token = (await http(base, "POST", "/api/auth/tokens", { token: alice, body: { name: "reader", scopes: ["jobs:read"] } })).body.token;
    expect((await arrayOf(arrayId, token)).body.total).toBe(2);
    const cancel = await http(base, "POST", `/api/gpu/arrays/${arrayId}/cancel`, { token });
    expect([cancel.status, cancel.body.error.details]).toEqual([403, { missingScope: "jobs:write" }]);
    expect((await submit({ command: "true", arrayCount: 2 }, token)).status).toBe(403);
  });

  test("gpu batch - a chain: a failed job cancels its dependant, and that one's dependant, with the reason", async () => {
    // `a` fails only once the chain behind it is in (no race with a fast launch): it runs when a
    // blocker has finished, which the test cancels after reading the waiting dependant.
    const blocker = (await submit({ command: "sleep 600" })).body.id;
    const a = (await submit({ command: "exit 3", dependsOn: [{ jobId: blocker, condition: "finished" }] })).body.id;
    const b = await submit({ command: "echo b", dependsOn: [{ jobId: a, condition: "succeeded" }] });
    expect(b.status).toBe(201);
    const c = (await submit({ command: "echo c", dependsOn: [{ jobId: b.body.id, condition: "succeeded" }] })).body.id;
    const onFail = (await submit({ command: "echo handled", dependsOn: [{ jobId: a, condition: "failed" }] })).body.id;
    expect((await detail(c)).body).toMatchObject({ status: "queued", queuePosition: null, statusReason: `waiting for job ${b.body.id} to succeed` });
    expect((await http(base, "POST", `/api/gpu/jobs/${blocker}/cancel`, { token: alice })).status).toBe(200);
    expect((await until(a, ended, "a ended")).status).toBe("failed");
    const bEnd = await until(b.body.id, ended, "b ended");
    expect(bEnd).toMatchObject({ status: "cancelled", startedAt: null, dependsOn: [{ jobId: a, condition: "succeeded" }] });
    expect(bEnd.statusReason).toMatch(new RegExp(`^dependency ${a} failed`));
    const cEnd = await until(c, ended, "c ended");
    expect(cEnd.status).toBe("cancelled");
    expect(cEnd.statusReason).toMatch(new RegExp(`^dependency ${b.body.id} was cancelled`));
    expect((await until(onFail, ended, "the failure handler ran")).status).toBe("completed");
  });

  test("gpu batch - a fan-in waits for every job, and an array dependency for every job of the array", async () => {
    const slow = (await submit({ command: "sleep 0.5" })).body.id;
    const fast = (await submit({ command: "true" })).body.id;
    const arr = (await submit({ command: "true", arrayCount: 3 })).body.arrayId;
    const join = (
      await submit({
        command: "echo joined",
        dependsOn: [
          { jobId: fast, condition: "succeeded" },
          { jobId: slow, condition: "finished" },
          { arrayId: arr, condition: "succeeded" },
        ],
      })
    ).body.id;
    const joined = await until(join, ended, "the join ran");
    expect(joined.status).toBe("completed");
    const before = [(await detail(slow)).body, (await detail(fast)).body];
    for (const j of before) expect(Date.parse(j.completedAt)).toBeLessThanOrEqual(Date.parse(joined.startedAt));
    // A dependency already decided at submission: met, the job is queued at once; impossible, 400 and nothing created.
    expect((await submit({ command: "true", dependsOn: [{ jobId: fast, condition: "succeeded" }] })).body.status).toBe("queued");
    const never = await submit({ command: "true", dependsOn: [{ jobId: fast, condition: "failed" }] });
    expect(never.status).toBe(400);
    expect(never.body.error.details[0].field).toBe("dependsOn");
  });

  test.each([
    ["arrayParallelism > arrayCount", { command: "true", arrayCount: 2, arrayParallelism: 3 }, "arrayParallelism"],
    ["arrayParallelism alone", { command: "true", arrayParallelism: 3 }, "arrayParallelism"],
    ["arrayCount 10001", { command: "true", arrayCount: 10001 }, "arrayCount"],
    [
      "65 dependencies",
      { command: "true", dependsOn: Array.from({ length: 65 }, () => ({ jobId: "00000000-0000-4000-8000-000000000000", condition: "finished" })) },
      "dependsOn",
    ],
    ["an unknown field in a dependency", { command: "true", dependsOn: [{ jobId: "x", condition: "finished", after: 1 }] }, "dependsOn[0].after"],
    ["both jobId and arrayId", { command: "true", dependsOn: [{ jobId: "x", arrayId: "y", condition: "finished" }] }, "dependsOn[0]"],
    ["a bad condition", { command: "true", dependsOn: [{ jobId: "x", condition: "started" }] }, "dependsOn"],
  ])("gpu batch - %s is 400 naming the field", async (_name, body, field) => {
    const res = await submit(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(JSON.stringify(res.body.error.details)).toContain(field);
  });

  test("gpu batch - another account's job or array, or no such id, is 404 and creates nothing; an array over the queued-jobs limit is 403", async () => {
    const own = (await submit({ command: "sleep 5" }, bob)).body.id;
    const ownArray = (await submit({ command: "true", arrayCount: 1 }, bob)).body.arrayId;
    for (const dep of [{ jobId: own }, { arrayId: ownArray }, { jobId: "not-a-uuid" }, { jobId: "00000000-0000-4000-8000-000000000000" }]) {
      const res = await submit({ command: "true", dependsOn: [{ ...dep, condition: "finished" }] });
      expect(res.status).toBe(404);
    }
    const over = await submit({ command: "true", arrayCount: 61 });
    expect(over.status).toBe(403);
    expect(over.body.error).toMatchObject({ code: "QUOTA_EXCEEDED", details: { resource: "queuedJobs", limit: 60 } });
  });
});
