/**
 * What the scheduler reads from the usage service, through the gateway with a real gpu-node (two
 * simulated cards): a queued job waits, with a statusReason naming the monthly quota, once its
 * account used up its GPU-seconds, and runs once an admin raises the quota; a runningGpus override
 * holds a job back while a card is free; a fairShareWeight override changes the start order.
 * QUOTA_CACHE_MS=0: each decision asks the ledger.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

const ADMIN_EMAIL = `${uniqueName("root")}@example.com`;
type Account = { token: string; id: string };

describe("usage and the scheduler - overrides and monthly quotas through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let admin: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "usage-scheduler-"));
  const register = async (email = `${uniqueName("u")}@example.com`): Promise<Account> => {
    const res = await http(base, "POST", "/api/auth/register", { body: { email, name: "u", password: "correct horse battery" } });
    return { token: res.body.accessToken, id: res.body.client.id };
  };
  const put = async (who: Account, body: unknown) =>
    expect((await http(base, "PUT", `/api/admin/accounts/${who.id}/quotas`, { token: admin, body })).status).toBe(200);
  const submit = async (who: Account, command: string) => {
    const res = await http(base, "POST", "/api/gpu/jobs", { token: who.token, body: { command } });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const job = async (who: Account, id: string) => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token: who.token })).body;
  const until = (who: Account, id: string, accept: (j: any) => boolean, message: string) =>
    waitFor(async () => ((j) => (accept(j) ? j : false))(await job(who, id)), { timeoutMs: 45_000, intervalMs: 50, message });
  const cancel = (who: Account, id: string) => http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token: who.token });

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "usage", "admin"],
      env: {
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: "Test GPU:1024,Test GPU:1024",
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
        QUOTA_CACHE_MS: "0",
        ADMIN_EMAILS: ADMIN_EMAIL,
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/quotas");
    admin = (await register(ADMIN_EMAIL)).token;
    const probe = await register();
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: probe.token })).body?.cluster?.totalGpus === 2, { message: "two cards" });
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("usage and the scheduler - a queued job waits naming the used-up gpuSeconds quota while a card is free, and runs once an admin raises it", async () => {
    const user = await register();
    // One card at a time, so the second job queues behind the first; 1 GPU-second this month.
    await put(user, { runningGpus: 1, gpuSeconds: 1 });
    const first = await submit(user, "sleep 1.5");
    await until(user, first, (j) => j.status === "running", "the first job running");
    const second = await submit(user, "true");
    await until(user, first, (j) => j.status === "completed", "the first job completed");
    const waiting = await until(user, second, (j) => /gpuSeconds quota/.test(j.statusReason ?? ""), "the second job waiting on the quota");
    expect(waiting).toMatchObject({
      status: "queued",
      statusReason: "monthly gpuSeconds quota of the account used up: waiting for the next month or a higher quota",
    });
    // The ledger records the first job's GPU-seconds once it ended (the scheduler held the second
    // already, on the first's reservation): new jobs are refused from then on.
    await waitFor(
      async () => {
        const { quotas } = (await http(base, "GET", "/api/quotas", { token: user.token })).body;
        return quotas.find((q: { resource: string }) => q.resource === "gpuSeconds")?.used >= 1;
      },
      { timeoutMs: 30_000, message: "the first job's GPU-seconds in the ledger" },
    );
    // Both cards are free now: only the quota holds it (and new jobs are refused with the details).
    expect((await http(base, "GET", "/api/gpu/status", { token: user.token })).body.cluster.availableGpus).toBe(2);
    // The submit gate (lib/quota-gate.ts) keeps each account's standing for QUOTA_CACHE_MS (2 s):
    // one read before the ledger held the use lets submissions through until it expires (CI saw
    // one). Such a job only waits in the queue (placement enforces the quota); accepted ones are
    // cancelled.
    const accepted: string[] = [];
    const refused = await waitFor(
      async () => {
        const res = await http(base, "POST", "/api/gpu/jobs", { token: user.token, body: { command: "true" } });
        if (res.status === 201) accepted.push(res.body.id);
        return res.status !== 201 && res;
      },
      { timeoutMs: 30_000, intervalMs: 250, message: "a new job refused on the used-up quota" },
    );
    expect([refused.status, refused.body.error.details.resource, refused.body.error.details.used >= 1]).toEqual([403, "gpuSeconds", true]);
    for (const id of accepted) expect([id, (await job(user, id)).status]).toEqual([id, "queued"]);
    for (const id of accepted) expect((await cancel(user, id)).status).toBe(200);
    expect((await job(user, second)).status).toBe("queued");
    await put(user, { gpuSeconds: 1000 });
    const done = await until(user, second, (j) => j.status === "completed", "the second job completed after the raise");
    expect(done.statusReason).toBeNull();
  });

  it("usage and the scheduler - a runningGpus override holds a job back while a card is free; raising it starts the job", async () => {
    const user = await register();
    await put(user, { runningGpus: 1 });
    const first = await submit(user, "sleep 60");
    await until(user, first, (j) => j.status === "running", "the first job running");
    const second = await submit(user, "sleep 60");
    const held = await until(user, second, (j) => j.statusReason === "account limit of 1 running GPU reached", "the second held by the override");
    expect(held.status).toBe("queued");
    expect((await http(base, "GET", "/api/gpu/status", { token: user.token })).body.cluster.availableGpus).toBe(1);
    await put(user, { runningGpus: 2 });
    await until(user, second, (j) => j.status === "running", "the second running after the raise");
    for (const id of [first, second]) expect((await cancel(user, id)).status).toBe(200);
    for (const id of [first, second]) await until(user, id, (j) => j.status === "cancelled", `job ${id} cancelled`);
  });

  it("usage and the scheduler - a fairShareWeight override moves an account's queued job ahead of a lighter user's", async () => {
    const [light, heavy, holder] = [await register(), await register(), await register()];
    // Usage first: heavy used more GPU time than light.
    const used = [await submit(light, "true"), await submit(heavy, "sleep 1")];
    await until(light, used[0], (j) => j.status === "completed", "light's job");
    await until(heavy, used[1], (j) => j.status === "completed", "heavy's job");
    // Both cards held, so both accounts' next jobs queue.
    const holders = [await submit(holder, "sleep 60"), await submit(holder, "sleep 60")];
    for (const id of holders) await until(holder, id, (j) => j.status === "running", "a holder running");
    const lightJob = await submit(light, "true");
    const heavyJob = await submit(heavy, "true");
    const positions = async () => [(await job(light, lightJob)).queuePosition, (await job(heavy, heavyJob)).queuePosition];
    expect(await positions()).toEqual([1, 2]);
    await put(heavy, { fairShareWeight: 1000 });
    expect(await positions()).toEqual([2, 1]);
    await put(heavy, { fairShareWeight: null });
    expect(await positions()).toEqual([1, 2]);
    for (const id of [...holders]) expect((await cancel(holder, id)).status).toBe(200);
    for (const [who, id] of [
      [light, lightJob],
      [heavy, heavyJob],
    ] as const)
      await until(who, id, (j) => j.status === "completed", "queued jobs ran");
  });
});
