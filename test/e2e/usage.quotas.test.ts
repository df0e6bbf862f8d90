/**
 * Quota enforcement and the admin account routes through the gateway: QUOTA_TOKENS_PER_MONTH
 * refuses the inference after the one that reached it (403 QUOTA_EXCEEDED with resource, limit,
 * used, resetsAt); an admin's override lifts it and null puts the default back; clients get 403
 * on the admin routes; bad PUT bodies are 400 and change nothing; queuedJobs and gpuSeconds
 * overrides refuse job submissions; a requestsPerMinute override rate-limits inference (429 with
 * the x-ratelimit headers) and null restores the default. QUOTA_CACHE_MS=0: every check asks the ledger.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { OllamaStandin } from "../support/provider-standins";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

const ADMIN_EMAIL = `${uniqueName("root")}@example.com`;

describe("usage quotas - through the gateway", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let base: string;
  let admin: string;
  let user: { token: string; id: string };
  const work = mkdtempSync(path.join(os.tmpdir(), "usage-quotas-"));
  const infer = () => http(base, "POST", "/api/models/infer", { token: user.token, body: { model: "llama3.2:1b", prompt: "hi" } });
  const put = (body: unknown, token = admin, id = user.id) => http(base, "PUT", `/api/admin/accounts/${id}/quotas`, { token, body });
  const overridesOf = async () =>
    (await http(base, "GET", "/api/admin/accounts?limit=200", { token: admin })).body.accounts.find((a: any) => a.id === user.id).overrides;
  const register = async (email: string) => {
    const res = await http(base, "POST", "/api/auth/register", { body: { email, name: "q", password: "correct horse battery" } });
    return { token: res.body.accessToken as string, id: res.body.client.id as string };
  };

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    ollama.set({ promptTokens: 12, completionTokens: 4 });
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "inference", "usage", "admin"],
      env: { OLLAMA_URL: ollama.url, QUOTA_TOKENS_PER_MONTH: "30", QUOTA_CACHE_MS: "0", ADMIN_EMAILS: ADMIN_EMAIL, GPU_SCHEDULE_TICK_MS: "100" },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/models/health");
    await waitForRoute(base, "GET", "/api/gpu/status");
    admin = (await register(ADMIN_EMAIL)).token;
    user = await register(`${uniqueName("user")}@example.com`);
  });

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("usage quotas - tokens: the inference that reaches the monthly limit is answered, the next is 403 with its details", async () => {
    for (let i = 0; i < 2; i++) expect((await infer()).status).toBe(200);
    await waitFor(async () => (await http(base, "GET", "/api/usage", { token: user.token })).body.inference.tokens === 32, { message: "32 tokens recorded" });
    const refused = await infer();
    expect(refused.status).toBe(403);
    const now = new Date();
    expect(refused.body.error).toEqual({
      code: "QUOTA_EXCEEDED",
      message: expect.stringContaining("tokens"),
      details: { resource: "tokens", limit: 30, used: 32, resetsAt: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString() },
    });
    // The refused inference reached no provider and counts nothing.
    expect((await http(base, "GET", "/api/usage", { token: user.token })).body.inference.requests).toBe(2);
  });

  it("usage quotas - the admin routes are 403 FORBIDDEN to a client, 401 without credentials", async () => {
    expect((await http(base, "GET", "/api/admin/accounts", { token: user.token })).status).toBe(403);
    expect((await put({ tokens: 1e9 }, user.token)).status).toBe(403);
    expect((await http(base, "GET", "/api/admin/accounts")).status).toBe(401);
    expect(await overridesOf()).toEqual({});
  });

  it.each([
    ["a negative limit", { tokens: -1 }],
    ["a string", { tokens: "many" }],
    ["an unknown field", { role: "admin" }],
    ["a zero weight", { fairShareWeight: 0 }],
    ["a fractional job count", { queuedJobs: 1.5 }],
    ["nothing", {}],
    ["tokens beyond a bigint", { tokens: 1e19 }],
    ["credits of 1e300", { credits: 1e300 }],
    ["storage of 1e300 MB", { storageMb: 1e300 }],
    ["a limit that parses as Infinity", '{"gpuSeconds": 1e400}'],
    ["a weight of a million", { fairShareWeight: 1e6 }],
    ["a negative running-GPU limit", { runningGpus: -1 }],
    ["a limit as an array", { credits: [1] }],
    ["a valid limit beside a role", { tokens: 5, role: "admin" }],
    ["a zero request rate", { requestsPerMinute: 0 }],
    ["a fractional token rate", { tokensPerMinute: 2.5 }],
  ])("usage quotas - PUT quotas with %s is 400 VALIDATION_FAILED and changes nothing", async (_name, body) => {
    const res =
      typeof body === "string"
        ? await http(base, "PUT", `/api/admin/accounts/${user.id}/quotas`, { token: admin, rawBody: body, headers: { "content-type": "application/json" } })
        : await put(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(await overridesOf()).toEqual({});
  });

  it("usage quotas - PUT quotas of an unknown account is 404", async () => {
    expect((await put({ tokens: 5 }, admin, "00000000-0000-4000-8000-000000000000")).status).toBe(404);
  });

  it("usage quotas - an admin's override lifts the limit at once; null puts the default back", async () => {
    const res = await put({ tokens: 1000 });
    expect(res.status).toBe(200);
    expect(res.body.overrides.tokens).toBe(1000);
    expect(res.body.quotas.find((q: any) => q.resource === "tokens").limit).toBe(1000);
    expect((await infer()).status).toBe(200);
    expect((await put({ tokens: null })).status).toBe(200);
    expect((await infer()).status).toBe(403);
    // The ledger is fed asynchronously (batched over a durable channel): the answers given reach it shortly.
    const listed = await waitFor(
      async () => {
        const account = (await http(base, "GET", "/api/admin/accounts?limit=200", { token: admin })).body.accounts.find((a: any) => a.id === user.id);
        return account.usage.inference.tokens >= 48 ? account : false;
      },
      { message: "the three answers in the admin's account list" },
    );
    expect(listed.role).toBe("client");
  });

  it("usage quotas - queuedJobs and gpuSeconds overrides refuse job submissions with their resource", async () => {
    expect((await put({ queuedJobs: 0 })).status).toBe(200);
    const queued = await http(base, "POST", "/api/gpu/jobs", { token: user.token, body: { command: "true" } });
    expect([queued.status, queued.body.error?.details?.resource]).toEqual([403, "queuedJobs"]);
    expect((await put({ queuedJobs: null, gpuSeconds: 0 })).status).toBe(200);
    const seconds = await http(base, "POST", "/api/gpu/jobs", { token: user.token, body: { command: "true" } });
    expect([seconds.status, seconds.body.error?.details]).toEqual([403, { resource: "gpuSeconds", limit: 0, used: 0, resetsAt: expect.any(String) }]);
    expect((await http(base, "GET", "/api/gpu/jobs", { token: user.token })).body.jobs).toEqual([]);
  });

  it("usage quotas - over a monthly quota a keyed replay still gets its first answer; a new key is 403 and leaves no key behind", async () => {
    const keyed = await register(`${uniqueName("keyed")}@example.com`);
    const submit = (key: string) => http(base, "POST", "/api/gpu/jobs", { token: keyed.token, body: { command: "true" }, headers: { "idempotency-key": key } });
    const first = await submit("k1");
    expect(first.status).toBe(201);
    expect((await put({ gpuSeconds: 0 }, admin, keyed.id)).status).toBe(200);
    const replay = await submit("k1");
    expect([replay.status, replay.body.id, replay.headers.get("idempotent-replayed")]).toEqual([201, first.body.id, "true"]);
    const fresh = await submit("k2");
    expect([fresh.status, fresh.body.error?.details?.resource]).toEqual([403, "gpuSeconds"]);
    expect((await put({ gpuSeconds: null }, admin, keyed.id)).status).toBe(200);
    // k2 was never claimed: with the quota back it creates a job of its own.
    const later = await submit("k2");
    expect(later.status).toBe(201);
    expect(later.headers.get("idempotent-replayed")).toBeNull();
    expect(later.body.id).not.toBe(first.body.id);
  });

  it("usage quotas - a requestsPerMinute override limits the account's inference at once (429 with the headers); null restores the default", async () => {
    const limited = await register(`${uniqueName("rpm")}@example.com`);
    const inferAs = () => http(base, "POST", "/api/models/infer", { token: limited.token, body: { model: "llama3.2:1b", prompt: "hi" } });
    // A tokens override keeps the monthly token quota (30) out of the way: only the rate is in play.
    expect((await put({ requestsPerMinute: 2, tokens: 1e9 }, admin, limited.id)).status).toBe(200);
    const answered = [await inferAs(), await inferAs()];
    expect(answered.map((r) => [r.status, r.headers.get("x-ratelimit-limit-requests"), r.headers.get("x-ratelimit-remaining-requests")])).toEqual([
      [200, "2", "1"],
      [200, "2", "0"],
    ]);
    const calls = ollama.requests.length;
    const refused = await inferAs();
    expect([refused.status, refused.body.error.code, refused.body.error.details.limit]).toEqual([429, "RATE_LIMITED", "requests"]);
    expect([refused.headers.get("x-ratelimit-limit-requests"), refused.headers.get("x-ratelimit-remaining-requests")]).toEqual(["2", "0"]);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(ollama.requests.length).toBe(calls); // refused before any provider
    // Another account keeps the default (INFERENCE_RPM unset: unlimited, no headers).
    const other = await register(`${uniqueName("free")}@example.com`);
    const otherAnswer = await http(base, "POST", "/api/models/infer", { token: other.token, body: { model: "llama3.2:1b", prompt: "hi" } });
    expect([otherAnswer.status, otherAnswer.headers.get("x-ratelimit-limit-requests")]).toEqual([200, null]);

    expect((await put({ requestsPerMinute: null }, admin, limited.id)).status).toBe(200);
    const restored = await inferAs();
    expect([restored.status, restored.headers.get("x-ratelimit-limit-requests")]).toEqual([200, null]);
  });
});
