/**
 * Signed webhooks (API-DECISIONS "GPU jobs: live output and events", Standard Webhooks) through
 * the gateway, to a receiver on 127.0.0.1 (WEBHOOK_ALLOW_PRIVATE=true; short retry delays):
 * signatures checked with the `standardwebhooks` reference library; a receiver failing twice
 * gets one success with one webhook-id; a platform restart between attempts loses nothing.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { Webhook } from "standardwebhooks";
import { dropDatabase, gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, testDatabaseUrl, waitFor } from "../support/platform";
import { Receiver, startReceiver } from "../support/webhook-receiver";

const SERVICES = ["api-gateway", "auth", "gpu-scheduler", "gpu-node"];

describe("gpu webhooks - signed deliveries at a job's end", () => {
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-webhooks-"));
  const databaseUrl = testDatabaseUrl();
  const env = sandboxedGpuEnv(work, { WEBHOOK_ALLOW_PRIVATE: "true", WEBHOOK_RETRY_DELAYS_S: "0.3,0.3,0.3,0.3", WEBHOOK_POLL_MS: "100" });
  let platform: TestPlatform;
  let receiver: Receiver;
  let base: string;
  let alice: string;
  let secret: string;

  const start = async () => {
    platform = await startTestPlatform({ services: SERVICES, env, databaseUrl, dropDatabase: false });
    base = platform.baseUrl;
  };
  const submit = (body: unknown, token = alice) => http(base, "POST", "/api/gpu/jobs", { token, body });
  const deliveries = async (token = alice) => (await http(base, "GET", "/api/webhooks/deliveries", { token })).body.deliveries as any[];
  const deliveryOf = (jobId: string, accept: (d: any) => boolean) =>
    waitFor(async () => (await deliveries()).find((d) => d.jobId === jobId && accept(d)), { timeoutMs: 20_000, message: `delivery of ${jobId}` });
  /** The request as the receiver got it, verified with the reference library (throws on a bad signature). */
  const verified = (r: { headers: Record<string, string>; body: string }, key = secret) => new Webhook(key).verify(r.body, r.headers) as any;

  // /flaky answers 500 twice, then 200; /down fails until the test lets it succeed.
  let downHealed = false;
  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    receiver = await startReceiver((p, nth) => (p === "/flaky" ? (nth <= 2 ? 500 : 200) : p === "/down" && !downHealed ? 503 : 200));
    await start();
    alice = await gpuTestUser(base);
    const res = await http(base, "POST", "/api/auth/webhook-secret", { token: alice });
    expect(res.status).toBe(201);
    secret = res.body.webhookSecret;
  });

  afterAll(async () => {
    await platform?.stop();
    await receiver?.close();
    await dropDatabase(databaseUrl).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu webhooks - the secret: whsec_ and 32 random bytes, JWT only", async () => {
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), "base64")).toHaveLength(32);
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: alice })).body.apiKey;
    const byKey = await http(base, "POST", "/api/auth/webhook-secret", { headers: { "x-api-key": key } });
    expect(byKey.status).toBe(403);
    expect(byKey.body.error.code).toBe("FORBIDDEN");
    expect((await http(base, "POST", "/api/auth/webhook-secret")).status).toBe(401);
  });

  test.each([
    ["completed", "echo hello", "job.completed"],
    ["failed", "exit 2", "job.failed"],
  ])("gpu webhooks - a %s job: one POST, signed per Standard Webhooks, with its detail", async (_name, command, type) => {
    const created = await submit({ command, webhookUrl: receiver.url(`/${type}`) });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect((await http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice })).body.webhookUrl).toBe(receiver.url(`/${type}`));
    const delivery = await deliveryOf(id, (d) => d.status === "delivered");
    expect(delivery).toMatchObject({ type, jobId: id, attempts: 1, lastStatusCode: 200, lastError: null, nextAttemptAt: null });
    const [got] = receiver.to(`/${type}`);
    const payload = verified(got);
    expect(payload).toMatchObject({ type, data: { id, status: type.slice(4) } });
    expect(got.headers["webhook-id"]).toBe(delivery.id);
    expect(Math.abs(Number(got.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(300);
    expect(() => verified(got, `whsec_${Buffer.alloc(32, 7).toString("base64")}`)).toThrow();
  });

  test("gpu webhooks - a cancelled job's webhook is job.cancelled", async () => {
    const id = (await submit({ command: "sleep 30", webhookUrl: receiver.url("/cancelled") })).body.id;
    await waitFor(async () => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice })).body.status === "running", { message: "running" });
    await http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token: alice });
    await deliveryOf(id, (d) => d.status === "delivered");
    expect(verified(receiver.to("/cancelled")[0])).toMatchObject({ type: "job.cancelled", data: { id, status: "cancelled" } });
  });

  test("gpu webhooks - a receiver that fails twice then succeeds: three attempts with one webhook-id, exactly one success", async () => {
    const id = (await submit({ command: "true", webhookUrl: receiver.url("/flaky") })).body.id;
    const delivery = await deliveryOf(id, (d) => d.status === "delivered");
    expect(delivery).toMatchObject({ attempts: 3, lastStatusCode: 200 });
    const got = receiver.to("/flaky");
    expect(got.map((r) => r.status)).toEqual([500, 500, 200]);
    expect(new Set(got.map((r) => r.headers["webhook-id"]))).toEqual(new Set([delivery.id]));
    for (const r of got) expect(verified(r).data.id).toBe(id);
  });

  test("gpu webhooks - a platform restart between attempts loses nothing: the retry comes from the database", async () => {
    const id = (await submit({ command: "true", webhookUrl: receiver.url("/down") })).body.id;
    const failing = await deliveryOf(id, (d) => d.lastStatusCode === 503 && d.status === "pending");
    await platform.stop();
    downHealed = true;
    await start();
    const delivered = await deliveryOf(id, (d) => d.status === "delivered");
    expect(delivered.id).toBe(failing.id);
    const got = receiver.to("/down");
    expect(got.filter((r) => r.status === 200)).toHaveLength(1);
    expect(new Set(got.map((r) => r.headers["webhook-id"]))).toEqual(new Set([failing.id]));
  });

  test("gpu webhooks - a new secret replaces the old at once: later deliveries verify with it only", async () => {
    const old = secret;
    secret = (await http(base, "POST", "/api/auth/webhook-secret", { token: alice })).body.webhookSecret;
    expect(secret).not.toBe(old);
    const id = (await submit({ command: "true", webhookUrl: receiver.url("/rotated") })).body.id;
    await deliveryOf(id, (d) => d.status === "delivered");
    const [got] = receiver.to("/rotated");
    expect(verified(got).data.id).toBe(id);
    expect(() => verified(got, old)).toThrow();
  });

  test("gpu webhooks - deliveries are the account's own", async () => {
    const bob = await gpuTestUser(base);
    expect(await deliveries(bob)).toEqual([]);
    expect((await http(base, "GET", "/api/webhooks/deliveries")).status).toBe(401);
  });

  test.each([
    ["not a URL", "not a url"],
    ["ftp:", "ftp://127.0.0.1/hook"],
    ["relative", "/hook"],
    ["too long", `http://127.0.0.1/${"a".repeat(2040)}`],
    ["not a string", 42],
  ])("gpu webhooks - webhookUrl %s is 400 VALIDATION_FAILED naming the field, and creates nothing", async (_name, webhookUrl) => {
    const before = (await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.length;
    const res = await submit({ command: "true", webhookUrl });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: any) => d.field)).toContain("webhookUrl");
    expect((await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.length).toBe(before);
  });

  test("gpu webhooks - an account without a secret cannot set webhookUrl (400), and nothing is created", async () => {
    const carol = await gpuTestUser(base);
    const res = await submit({ command: "true", webhookUrl: receiver.url("/nosecret") }, carol);
    expect(res.status).toBe(400);
    expect(res.body.error.details[0]).toMatchObject({ field: "webhookUrl" });
    expect(res.body.error.details[0].message).toMatch(/webhook-secret/);
    expect((await http(base, "GET", "/api/gpu/jobs", { token: carol })).body.jobs).toEqual([]);
  });
});

describe("gpu webhooks - private targets refused without WEBHOOK_ALLOW_PRIVATE", () => {
  let platform: TestPlatform;
  let receiver: Receiver;
  let token: string;

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    receiver = await startReceiver();
    const work = mkdtempSync(path.join(os.tmpdir(), "gpu-webhooks-private-"));
    platform = await startTestPlatform({ services: SERVICES, env: sandboxedGpuEnv(work, { WEBHOOK_ALLOW_PRIVATE: undefined as unknown as string }) });
    token = await gpuTestUser(platform.baseUrl);
    expect((await http(platform.baseUrl, "POST", "/api/auth/webhook-secret", { token })).status).toBe(201);
  });

  afterAll(async () => {
    await platform?.stop();
    await receiver?.close();
  });

  test.each([
    ["loopback", () => receiver.url("/private")],
    ["localhost by name", () => receiver.url("/private").replace("127.0.0.1", "localhost")],
    ["10.x", () => "http://10.1.2.3/hook"],
    ["172.16.x", () => "https://172.16.0.9/hook"],
    ["192.168.x", () => "http://192.168.1.1/hook"],
    ["IPv6 loopback", () => "http://[::1]:9/hook"],
    ["link-local (cloud metadata)", () => "http://169.254.169.254/latest/meta-data"],
    ["IPv6 unique-local", () => "http://[fc00::1]/hook"],
    ["IPv4-mapped IPv6 loopback", () => "http://[::ffff:127.0.0.1]/hook"],
  ])("gpu webhooks - %s is 400 and nothing is sent or created", async (_name, url) => {
    const res = await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command: "true", webhookUrl: url() } });
    expect(res.status).toBe(400);
    expect(res.body.error.details[0].field).toBe("webhookUrl");
    expect((await http(platform.baseUrl, "GET", "/api/gpu/jobs", { token })).body.jobs).toEqual([]);
    expect(receiver.received).toEqual([]);
  });
});
