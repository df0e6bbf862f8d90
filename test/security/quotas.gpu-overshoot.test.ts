/**
 * GPU-seconds overshoot by submission speed (finding 5): a 2 GPU-second monthly quota, six cards
 * free, six jobs of `sleep 1` with timeoutSeconds 2 submitted at once. Each placement reserves its
 * timeoutSeconds × cards under the placement lock, so a job is placed only while the quota minus
 * what the account used and may still use is above 0: the account overshoots by less than one
 * job's reservation. Before the fix all six started at once (about 3× the quota).
 * The same for credits: the card priced at 0.5 credits per GPU-second (others free), a 1-credit
 * quota, each placement reserving timeoutSeconds × cards × 0.5 = 1 credit.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

const LIMIT = 2;
const TIMEOUT_S = 2;
const JOBS = 6;
const CREDIT_LIMIT = 1;
const PRICE = 0.5; // CREDITS_PER_GPU_SECOND of "Test GPU"

/** A platform of six one-card simulated nodes, quotas and prices in `env`; its logs under `work`. */
const startGpuPlatform = (work: string, env: Record<string, string>) =>
  startTestPlatform({
    services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "usage"],
    env: {
      GPU_EXECUTOR: "process",
      GPU_SIMULATE: Array.from({ length: JOBS }, () => "Test GPU:1024").join(","),
      GPU_HEARTBEAT_S: "1",
      GPU_SCHEDULE_TICK_MS: "100",
      GPU_JOB_LOG_DIR: path.join(work, "logs"),
      QUOTA_CACHE_MS: "0",
      ...env,
    },
  });

/** Registers an account and submits six jobs of `sleep 1` (timeoutSeconds 2) at once, once the six cards are seen. */
async function submitSix(base: string): Promise<{ token: string; ids: string[] }> {
  const reg = await http(base, "POST", "/api/auth/register", {
    body: { email: `${uniqueName("g")}@example.com`, name: "g", password: "correct horse battery" },
  });
  const token = reg.body.accessToken as string;
  await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === JOBS, { message: "six cards" });
  const submitted = await Promise.all(
    Array.from({ length: JOBS }, () => http(base, "POST", "/api/gpu/jobs", { token, body: { command: "sleep 1", timeoutSeconds: TIMEOUT_S } })),
  );
  expect(submitted.map((s) => s.status)).toEqual(Array(JOBS).fill(201));
  return { token, ids: submitted.map((s) => s.body.id as string) };
}

describe("quotas overshoot - GPU-seconds reserved at placement", () => {
  let platform: TestPlatform;
  let base: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "quota-gpu-"));

  beforeAll(async () => {
    platform = await startGpuPlatform(work, { QUOTA_GPU_SECONDS_PER_MONTH: String(LIMIT) });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/quotas");
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("quotas overshoot - six jobs submitted at once use less than the quota plus one job's reservation", async () => {
    const { token, ids } = await submitSix(base);
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

describe("quotas overshoot - GPU credits reserved at placement", () => {
  let platform: TestPlatform;
  let base: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "quota-credits-"));

  beforeAll(async () => {
    // Prices only usage reads: the scheduler reserves at those the standing carries.
    const prices = JSON.stringify({ default: 0, "test gpu": PRICE });
    platform = await startGpuPlatform(work, { QUOTA_CREDITS_PER_MONTH: String(CREDIT_LIMIT), CREDITS_PER_GPU_SECOND: prices });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/quotas");
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("quotas overshoot - six jobs submitted at once cost less than the credit quota plus one job's reservation at its card's price", async () => {
    const { token, ids } = await submitSix(base);
    // Settled: every job ended, or waits on the credits used up (not only reserved: a running job may still free some).
    const settled = await waitFor(
      async () => {
        const jobs = await Promise.all(ids.map(async (id) => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token })).body));
        const done = jobs.every(
          (j) => j.status === "completed" || (j.status === "queued" && /credits quota of the account used up/.test(j.statusReason ?? "")),
        );
        return done ? jobs : false;
      },
      { timeoutMs: 60_000, intervalMs: 100, message: "every job ended or waiting on the used-up credits" },
    );
    const ran = settled.filter((j) => j.status === "completed").length;
    const credits = await waitFor(
      async () => {
        const usage = (await http(base, "GET", "/api/usage", { token })).body;
        return usage.gpu.jobs === ran ? (usage.credits as number) : false;
      },
      { message: "every attempt in the ledger" },
    );
    const reservation = TIMEOUT_S * PRICE;
    console.log(
      `credits overshoot, GPU: ${ran} of ${JOBS} jobs ran, ${credits} credits of ${CREDIT_LIMIT}, overshoot ${Math.max(0, credits - CREDIT_LIMIT).toFixed(3)} (one reservation: ${reservation})`,
    );
    expect(credits).toBeGreaterThanOrEqual(CREDIT_LIMIT);
    expect(credits - CREDIT_LIMIT).toBeLessThan(reservation);
    expect(ran).toBeLessThan(JOBS);
    const refused = await http(base, "POST", "/api/gpu/jobs", { token, body: { command: "true" } });
    expect([refused.status, refused.body.error?.details?.resource]).toEqual([403, "credits"]);
  });
});
