/**
 * Multi-card jobs (`gpuCount`, API-DECISIONS "GPU jobs: controls") through the HTTP gateway:
 * gateway, auth, gpu-scheduler and a real gpu-node (process executor in the bubblewrap sandbox,
 * four simulated cards) in one process; every account may hold 3 running GPUs.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { gpuTestUser, http, startTestPlatform, TestPlatform, waitFor } from "../support/platform";

const CARD = "NVIDIA GeForce RTX 3060";
const RUNNING_LIMIT = 3;

describe("gpu gangs - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-gangs-"));

  const submit = (token: string, body: unknown) => http(base, "POST", "/api/gpu/jobs", { token, body });
  const detail = (token: string, id: string) => http(base, "GET", `/api/gpu/jobs/${id}`, { token });
  const cancel = (token: string, id: string) => http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token });
  const status = async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body;
  const until = (token: string, id: string, accept: (job: any) => boolean, message: string, timeoutMs = 15_000) =>
    waitFor(
      async () => {
        const res = await detail(token, id);
        return accept(res.body) ? res.body : false;
      },
      { timeoutMs, intervalMs: 50, message },
    );
  const ended = (j: any) => ["completed", "failed", "cancelled"].includes(j.status);
  const busyUuids = async () => (await status()).cluster.gpus.filter((g: any) => !g.available).map((g: any) => g.uuid);

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: {
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: Array.from({ length: 4 }, () => `${CARD}:12288`).join(","),
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
        QUOTA_RUNNING_GPUS: String(RUNNING_LIMIT),
      },
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base, 4);
    bob = await gpuTestUser(base, 4);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu gangs - a 2-card job on a node with 2 free of 4 cards runs on exactly those two, and counts seconds x 2", async () => {
    const blockers = [await submit(bob, { command: "sleep 60" }), await submit(bob, { command: "sleep 60" })].map((r) => r.body.id);
    for (const id of blockers) await until(bob, id, (j) => j.status === "running", "a blocker running");
    const busy = await busyUuids();
    expect(busy).toHaveLength(2);
    const all = (await status()).cluster.gpus.map((g: any) => g.uuid);
    const free = all.filter((u: string) => !busy.includes(u)).sort();

    const res = await submit(alice, { command: 'sleep 1; printf "%s" "$CUDA_VISIBLE_DEVICES"', gpuCount: 2 });
    expect(res.status).toBe(201);
    const done = await until(alice, res.body.id, ended, "the 2-card job ended");
    expect(done).toMatchObject({ status: "completed", gpuCount: 2, gpuType: CARD });
    expect(done.result.output.split(",").sort()).toEqual(free);
    const wall = (Date.parse(done.completedAt) - Date.parse(done.startedAt)) / 1000;
    expect(wall).toBeGreaterThanOrEqual(1);
    expect(done.gpuSecondsUsed).toBeCloseTo(2 * wall, 2);
    // Listed with its count too; a job without one has 1.
    const listed = (await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.find((j: any) => j.id === res.body.id);
    expect(listed.gpuCount).toBe(2);
    expect((await detail(bob, blockers[0])).body.gpuCount).toBe(1);
    for (const id of blockers) await cancel(bob, id);
    await waitFor(async () => (await busyUuids()).length === 0, { message: "the blockers' cards free" });
  });

  test("gpu gangs - a waiting gang says why, keeps its node's freed cards from 1-card jobs, holds every card once running, and frees them all", async () => {
    // Bob holds 3 of the 4 cards (his running limit).
    const blockers: string[] = [];
    for (let i = 0; i < 3; i++) blockers.push((await submit(bob, { command: "sleep 60" })).body.id);
    for (const id of blockers) await until(bob, id, (j) => j.status === "running", "a blocker running");
    const gang = await submit(alice, { command: "sleep 60", gpuCount: 3 });
    expect(gang.status).toBe(201);
    const waiting = await until(alice, gang.body.id, (j) => j.statusReason !== null, "the gang's reason");
    expect(waiting).toMatchObject({ status: "queued", gpuCount: 3, statusReason: "waiting for 3 free GPUs on one node" });

    // Two cards free up one by one; Bob's 1-card job, queued meanwhile, must not take them from the gang.
    await cancel(bob, blockers[0]);
    const single = (await submit(bob, { command: "sleep 60" })).body.id;
    await waitFor(async () => (await status()).cluster.availableGpus === 2, { message: "two cards free" });
    await until(bob, single, (j) => j.statusReason === "waiting for a free GPU", "the 1-card job seen waiting");
    await cancel(bob, blockers[1]);
    await until(alice, gang.body.id, (j) => j.status === "running", "the gang running", 20_000);
    expect((await detail(bob, single)).body.status).toBe("queued");
    await waitFor(async () => (await status()).cluster.busyGpus === 4, { message: "the gang's three cards and Bob's last one busy" });

    // Over the account's limit: Alice's second gang waits and says why (a card is free), and runs once the first ends.
    for (const id of [single, blockers[2]]) await cancel(bob, id);
    await waitFor(async () => (await status()).cluster.busyGpus === 3, { message: "only the gang's cards busy" });
    const second = await submit(alice, { command: "true", gpuCount: 2 });
    // The cancelled jobs' cards may still count as held at the first pass after them ("waiting for 2 free GPUs"): the reason
    // a later pass gives, once only the gang holds cards, is the account's limit.
    const reason = `account limit of ${RUNNING_LIMIT} running GPUs reached (this job needs 2)`;
    const limited = await until(alice, second.body.id, (j) => j.statusReason === reason, "the second gang's reason: the account's limit");
    expect(limited.status).toBe("queued");
    await cancel(alice, gang.body.id);
    expect(await until(alice, second.body.id, ended, "the second gang ran once the first ended", 20_000)).toMatchObject({ status: "completed" });
    await waitFor(async () => (await busyUuids()).length === 0, { message: "every card free" });
  });

  test.each([
    ["0", 0, /gpuCount/],
    ["17", 17, /gpuCount/],
    ["a string", "2", /gpuCount/],
    ["not an integer", 1.5, /gpuCount/],
    ["negative", -1, /gpuCount/],
    ["more than the one node holds", 4 + 1, /No GPU node has 5 GPUs of one type; the most on one node is 4/],
    ["more than the account may run", RUNNING_LIMIT + 1, /limit of 3 running GPUs/],
  ])("gpu gangs - gpuCount %s is 400 VALIDATION_FAILED naming gpuCount, and creates nothing", async (_name, gpuCount, message) => {
    const before = (await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.map((j: any) => j.id);
    const res = await submit(alice, { command: "echo never", gpuCount });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: any) => d.field)).toContain("gpuCount");
    expect(res.body.error.details.map((d: any) => d.message).join(" ")).toMatch(message);
    expect((await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.map((j: any) => j.id)).toEqual(before);
  });
});
