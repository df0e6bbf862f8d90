/**
 * GPU-seconds overshoot by submission speed (finding 5): a 2 GPU-second monthly quota, six cards
 * free, six jobs of `sleep 1` with timeoutSeconds 2 submitted at once. Each placement reserves its
 * timeoutSeconds × cards under the placement lock, so a job is placed only while the quota minus
 * what the account used and may still use is above 0: the account overshoots by less than one
 * job's reservation. Before the fix all six started at once (about 3× the quota).
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

const LIMIT = 2;
const TIMEOUT_S = 2;
const JOBS = 6;

describe("quotas overshoot - GPU-seconds reserved at placement", () => {
  let platform: TestPlatform;
  let base: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "quota-gpu-"));

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "usage"],
      env: {
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: Array.from({ length: JOBS }, () => "Test GPU:1024").join(","),
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
        QUOTA_GPU_SECONDS_PER_MONTH: String(LIMIT),
        QUOTA_CACHE_MS: "0",
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/quotas");
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("quotas overshoot - six jobs submitted at once use less than the quota plus one job's reservation", async () => {
    const reg = await http(base, "POST", "/api/auth/register", {
      body: { email: `${uniqueName("g")}@example.com`, name: "g", password: "correct horse battery" },
    });
    const token = reg.body.accessToken as string;
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === JOBS, { message: "six cards" });
    const submitted = await Promise.all(
      Array.from({ length: JOBS }, () => http(base, "POST", "/api/gpu/jobs", { token, body: { command: "sleep 1", timeoutSeconds: TIMEOUT_S } })),
    );
    expect(submitted.map((s) => s.status)).toEqual(Array(JOBS).fill(201));
    const ids = submitted.map((s) => s.body.id as string);
    // Settled: nothing holds a card, and every job either ended or waits naming the quota.
    const settled = await waitFor(
      async () => {
        const jobs = await Promise.all(ids.map(async (id) => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token })).body));
        const done = jobs.every((j) => j.status === "completed" || (j.status === "queued" && /gpuSeconds quota/.test(j.statusReason ?? "")));
        return done ? jobs : false;
      },
      { timeoutMs: 60_000, intervalMs: 100, message: "every job ended or waiting on the quota" },
    );
    const ran = settled.filter((j) => j.status === "completed").length;
    const used = await waitFor(
      async () => {
        const usage = (await http(base, "GET", "/api/usage", { token })).body.gpu;
        return usage.jobs === ran ? (usage.gpuSeconds as number) : false;
      },
      { message: "every attempt in the ledger" },
    );
    console.log(
      `quota overshoot, GPU: ${ran} of ${JOBS} jobs ran, ${used} GPU-seconds of ${LIMIT}, overshoot ${Math.max(0, used - LIMIT).toFixed(2)} (one reservation: ${TIMEOUT_S})`,
    );
    expect(used).toBeGreaterThanOrEqual(LIMIT);
    expect(used - LIMIT).toBeLessThan(TIMEOUT_S);
    expect(ran).toBeLessThan(JOBS);
    // Over the limit, a submission is refused at once.
    const refused = await http(base, "POST", "/api/gpu/jobs", { token, body: { command: "true" } });
    expect([refused.status, refused.body.error?.details?.resource]).toEqual([403, "gpuSeconds"]);
  });
});
