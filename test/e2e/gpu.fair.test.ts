/**
 * Sharing the cluster fairly (API-DECISIONS "GPU jobs: sharing the cluster fairly") through the
 * HTTP gateway: gateway, auth, gpu-scheduler and a real gpu-node (process executor, one simulated
 * card) in one process; three accounts; QUOTA_QUEUED_JOBS=5.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const QUEUED_LIMIT = 5;

describe("gpu fair share - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  const tokens: Record<string, string> = {};
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-fair-"));

  const submit = (who: string, body: unknown) => http(base, "POST", "/api/gpu/jobs", { token: tokens[who], body });
  const detail = (who: string, id: string) => http(base, "GET", `/api/gpu/jobs/${id}`, { token: tokens[who] });
  const list = async (who: string) => (await http(base, "GET", "/api/gpu/jobs", { token: tokens[who] })).body.jobs as any[];
  const until = (who: string, id: string, accept: (job: any) => boolean, message: string, timeoutMs = 20_000) =>
    waitFor(
      async () => {
        const res = await detail(who, id);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs, intervalMs: 50, message },
    );
  const ended = (j: any) => ["completed", "failed", "cancelled"].includes(j.status);
  const cancel = (who: string, id: string) => http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token: tokens[who] });
  /** A job holding the only card until cancelled. */
  const holdCard = async (who: string) => {
    const holder = await submit(who, { command: "sleep 60" });
    expect(holder.status).toBe(201);
    await until(who, holder.body.id, (j) => j.status === "running", "the holder running");
    return holder.body.id as string;
  };

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: {
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: "Test GPU:1024",
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
        QUOTA_QUEUED_JOBS: String(QUEUED_LIMIT),
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    for (const who of ["alice", "bob", "carol"]) {
      const res = await http(base, "POST", "/api/auth/register", {
        body: { email: `${who}-${Date.now()}@example.com`, name: who, password: "correct horse battery" },
      });
      tokens[who] = res.body.accessToken;
    }
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: tokens.alice })).body?.cluster?.totalGpus === 1, {
      message: "the card announced",
    });
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test.each([
    ["an unknown word", "urgent"],
    ["upper case", "HIGH"],
    ["empty", ""],
    ["a number", 2],
    ["an object", { level: "high" }],
  ])("gpu fair share - bad priority: %s is 400 VALIDATION_FAILED naming priority, and creates nothing", async (_name, priority) => {
    const before = (await list("carol")).map((j) => j.id);
    const res = await submit("carol", { command: "echo never", priority });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: any) => d.field)).toContain("priority");
    expect((await list("carol")).map((j) => j.id)).toEqual(before);
  });

  test("gpu fair share - another account's single job goes before a busy account's queue; queuePosition tells the start order", async () => {
    const holder = await holdCard("alice");
    const alices: string[] = [];
    for (let i = 0; i < 3; i++) alices.push((await submit("alice", { command: "true" })).body.id);
    const urgent = await submit("alice", { command: "true", priority: "high" });
    expect(urgent.body.queuePosition).toBe(1); // before her older normal ones
    const bobs = await submit("bob", { command: "true" });
    // Alice holds the card (share 1), bob holds and used nothing (share 0): bob first, then alice's high one, then hers by age.
    expect(bobs.body).toMatchObject({ status: "queued", queuePosition: 1 });
    const expected = [bobs.body.id, urgent.body.id, ...alices];
    const owner = (id: string) => (id === bobs.body.id ? "bob" : "alice");
    for (const [i, id] of expected.entries()) {
      const job = (await detail(owner(id), id)).body;
      expect(job).toMatchObject({ status: "queued", queuePosition: i + 1, statusReason: "waiting for a free GPU" });
    }
    expect((await detail("alice", urgent.body.id)).body.priority).toBe("high");
    expect((await detail("alice", alices[0])).body.priority).toBe("normal");
    expect((await cancel("alice", holder)).status).toBe(200);
    const done = [];
    for (const id of expected) done.push(await until(owner(id), id, ended, `job ${id} ended`));
    expect(done.map((j) => j.status)).toEqual(expected.map(() => "completed"));
    expect(done.every((j) => j.queuePosition === null)).toBe(true);
    const byStart = [...done].sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt)).map((j) => j.id);
    expect(byStart).toEqual(expected);
  });

  test("gpu fair share - over QUOTA_QUEUED_JOBS a submission is 403 QUOTA_EXCEEDED with its details, and creates nothing", async () => {
    const holder = await holdCard("alice");
    const queued: string[] = [];
    for (let i = 0; i < QUEUED_LIMIT - 1; i++) {
      const res = await submit("carol", { command: "true" });
      expect(res.status).toBe(201);
      queued.push(res.body.id);
    }
    const keyed = { command: "true" };
    const last = await http(base, "POST", "/api/gpu/jobs", { token: tokens.carol, body: keyed, headers: { "Idempotency-Key": "carol-last" } });
    expect(last.status).toBe(201);
    queued.push(last.body.id);
    const before = (await list("carol")).map((j) => j.id);
    const refused = await submit("carol", { command: "true" });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: "QUOTA_EXCEEDED", details: { resource: "queuedJobs", limit: QUEUED_LIMIT, used: QUEUED_LIMIT } });
    // A refused keyed request stores nothing; a replay of one already answered gets its answer, cap or not.
    const refusedKeyed = await http(base, "POST", "/api/gpu/jobs", { token: tokens.carol, body: keyed, headers: { "Idempotency-Key": "carol-new" } });
    expect(refusedKeyed.status).toBe(403);
    const replay = await http(base, "POST", "/api/gpu/jobs", { token: tokens.carol, body: keyed, headers: { "Idempotency-Key": "carol-last" } });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(last.body);
    expect((await list("carol")).map((j) => j.id)).toEqual(before);
    // Another account is not limited by carol's queue.
    const bobs = await submit("bob", { command: "true" });
    expect(bobs.status).toBe(201);
    // A cancelled job frees a place.
    expect((await cancel("carol", queued[0])).status).toBe(200);
    expect((await submit("carol", { command: "true" })).status).toBe(201);
    expect((await cancel("alice", holder)).status).toBe(200);
  });
});
