/**
 * Restricted tokens (cit_…) through the HTTP gateway, every service in one process against the real
 * PostgreSQL, the provider stand-ins answering inferences: made, listed and deleted; scopes per
 * route; the model allow-list (fallbacks included); what a token can never do; expiry; credits
 * spent and the token's limit; a job's token; and the account's one API key left as it was.
 */
import { Pool } from "pg";
import { randomUUID } from "crypto";
import { InferencePlatform, openAiClient, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { http, HttpResult, uniqueName, waitFor, waitForRoute } from "../support/platform";

const ADMIN_EMAIL = `${uniqueName("ops")}@example.com`;
/** The gateway trusts auth's answer for a token at most this long. */
const RULE_MS = 1_000;

let p: InferencePlatform;
let base: string;
let pool: Pool;

beforeAll(async () => {
  p = await startInferencePlatform(
    {
      ADMIN_EMAILS: ADMIN_EMAIL,
      AUTH_RATE_LIMIT_PER_IP: "10000",
      MODEL_FALLBACKS: JSON.stringify({ "qwen2.5:0.5b": ["Qwen/Qwen2.5-7B-Instruct"] }),
      CREDITS_PER_1K_TOKENS: "1000", // a credit per token
      QUOTA_CACHE_MS: "0",
    },
    { services: ["api-gateway", "auth", "inference", "usage", "gpu-scheduler", "admin"] },
  );
  base = p.platform.baseUrl;
  pool = new Pool({ connectionString: p.platform.databaseUrl, max: 2 });
  await waitForRoute(base, "GET", "/api/usage");
  await waitForRoute(base, "GET", "/api/gpu/jobs");
  await waitForRoute(base, "GET", "/api/admin/nodes");
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await p?.stop();
});

async function account(email = `${uniqueName("tok")}@example.com`): Promise<string> {
  const reg = await http(base, "POST", "/api/auth/register", { body: { email, name: "T", password: "password-123" } });
  expect(reg.status).toBe(201);
  return reg.body.accessToken as string;
}

async function mint(jwt: string, body: Record<string, unknown>): Promise<{ id: string; token: string } & Record<string, any>> {
  const res = await http(base, "POST", "/api/auth/tokens", { token: jwt, body });
  expect(res.status).toBe(201);
  return res.body;
}

const listed = async (jwt: string) => (await http(base, "GET", "/api/auth/tokens", { token: jwt })).body.tokens as Array<Record<string, any>>;

function expectError(res: HttpResult, status: number, code: string) {
  expect([res.status, res.body?.error?.code]).toEqual([status, code]);
}

describe("auth - restricted tokens: made, listed, deleted", () => {
  it("auth - POST /api/auth/tokens answers the token once; GET lists it without the secret; DELETE stops it", async () => {
    const jwt = await account();
    const before = Date.now();
    const made = await mint(jwt, { name: "ci", scopes: ["usage:read"], models: ["llama3.2:1b"], maxCredits: 5 });
    expect(made).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      token: expect.stringMatching(/^cit_[a-z0-9]{32}$/),
      name: "ci",
      scopes: ["usage:read"],
      models: ["llama3.2:1b"],
      databases: null,
      expiresAt: expect.any(String),
      maxCredits: 5,
      createdAt: expect.any(String),
    });
    expect(Date.parse(made.expiresAt) - before).toBeGreaterThan(86_400_000 - 60_000); // the default: a day
    expect(Date.parse(made.expiresAt) - before).toBeLessThan(86_400_000 + 60_000);

    const tokens = await listed(jwt);
    expect(tokens).toEqual([{ ...made, token: undefined, creditsUsed: 0, lastUsedAt: null, jobId: null }].map(({ token: _t, ...t }) => t));
    expect(JSON.stringify(tokens)).not.toContain(made.token);

    expect((await http(base, "GET", "/api/usage", { token: made.token })).status).toBe(200);
    expect(await http(base, "DELETE", `/api/auth/tokens/${made.id}`, { token: jwt })).toMatchObject({ status: 200, body: { message: expect.any(String) } });
    expectError(await http(base, "GET", "/api/usage", { token: made.token }), 401, "UNAUTHORIZED");
    expect(await listed(jwt)).toEqual([]);
  });

  it("auth - another account's token id is 404 and deletes nothing", async () => {
    const owner = await account();
    const other = await account();
    const made = await mint(owner, { name: "mine", scopes: ["usage:read"] });
    expectError(await http(base, "DELETE", `/api/auth/tokens/${made.id}`, { token: other }), 404, "NOT_FOUND");
    expectError(await http(base, "DELETE", `/api/auth/tokens/not-an-id`, { token: owner }), 404, "NOT_FOUND");
    expect((await http(base, "GET", "/api/usage", { token: made.token })).status).toBe(200);
  });

  it.each([
    ["no name", { scopes: ["usage:read"] }, "name"],
    ["an empty name", { name: "", scopes: ["usage:read"] }, "name"],
    ["a name over 64 characters", { name: "x".repeat(65), scopes: ["usage:read"] }, "name"],
    ["no scopes", { name: "t" }, "scopes"],
    ["an unknown scope", { name: "t", scopes: ["admin"] }, "scopes"],
    ["a lifetime under 60 s", { name: "t", scopes: ["usage:read"], expiresInSeconds: 59 }, "expiresInSeconds"],
    ["a lifetime over a year", { name: "t", scopes: ["usage:read"], expiresInSeconds: 31_536_001 }, "expiresInSeconds"],
    ["negative maxCredits", { name: "t", scopes: ["usage:read"], maxCredits: -1 }, "maxCredits"],
    ["a database that is not an id", { name: "t", scopes: ["databases:read"], databases: ["prod"] }, "databases"],
    ["an unknown field", { name: "t", scopes: ["usage:read"], admin: true }, "admin"],
  ])("auth - %s is 400 naming the field, and no token is made", async (_name, body, field) => {
    const jwt = await account();
    const res = await http(base, "POST", "/api/auth/tokens", { token: jwt, body });
    expectError(res, 400, "VALIDATION_FAILED");
    expect(JSON.stringify(res.body.error.details)).toContain(field);
    expect(await listed(jwt)).toEqual([]);
  });

  it("auth - a token past its expiry is 401", async () => {
    const jwt = await account();
    const made = await mint(jwt, { name: "short", scopes: ["usage:read"], expiresInSeconds: 60 });
    expect((await http(base, "GET", "/api/usage", { token: made.token })).status).toBe(200);
    await pool.query("UPDATE auth.tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [made.id]);
    const expiredAt = Date.now();
    await waitFor(async () => (await http(base, "GET", "/api/usage", { token: made.token })).status === 401, {
      timeoutMs: 5_000,
      message: "expired token refused",
    });
    expect(Date.now() - expiredAt).toBeLessThan(RULE_MS + 500);
  });

  it("auth - the account's one API key is untouched: tokens are made beside it, and a new key leaves the tokens working", async () => {
    const jwt = await account();
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: jwt })).body.apiKey as string;
    const made = await mint(jwt, { name: "beside", scopes: ["usage:read"] });
    expect((await http(base, "GET", "/api/auth/me", { token: key })).status).toBe(200);
    const next = (await http(base, "POST", "/api/auth/api-keys", { token: jwt })).body.apiKey as string;
    await waitFor(async () => (await http(base, "GET", "/api/auth/me", { token: key })).status === 401, { message: "the old key refused" });
    expect((await http(base, "GET", "/api/auth/me", { token: next })).status).toBe(200);
    expect((await http(base, "GET", "/api/usage", { token: made.token })).status).toBe(200);
  });
});

describe("auth - what a restricted token may do", () => {
  it.each([
    ["usage:read", "GET", "/api/usage", 200],
    ["usage:read", "GET", "/api/quotas", 200],
    ["jobs:read", "GET", "/api/gpu/jobs", 200],
    ["jobs:write", "GET", "/api/gpu/jobs", 200], // :write includes :read
    ["inference", "GET", "/api/gpu/jobs", "jobs:read"],
    ["jobs:read", "POST", "/api/gpu/jobs/00000000-0000-4000-8000-000000000000/cancel", "jobs:write"],
    ["jobs:read", "POST", "/api/models/infer", "inference"],
    ["inference", "GET", "/api/usage", "usage:read"],
    ["databases:write", "GET", "/api/quotas", "usage:read"],
  ] as const)("auth - a token with %s on %s %s: %s", async (scope, method, path, expected) => {
    const jwt = await account();
    const { token } = await mint(jwt, { name: "matrix", scopes: [scope] });
    const res = await http(base, method, path, { token, body: method === "POST" ? { model: "llama3.2:1b", prompt: "hi" } : undefined });
    if (typeof expected === "number") expect(res.status).toBe(expected);
    else expect([res.status, res.body.error.code, res.body.error.details]).toEqual([403, "FORBIDDEN", { missingScope: expected }]);
  });

  it("auth - a token of an admin account, with every scope, never mints, lists or deletes tokens, keys or webhook secrets, nor reaches an admin route; it may say whose it is", async () => {
    const jwt = await account(ADMIN_EMAIL);
    expect((await http(base, "GET", "/api/admin/nodes", { token: jwt })).status).toBe(200);
    const all = ["jobs:read", "jobs:write", "inference", "databases:read", "databases:write", "usage:read"];
    const { token } = await mint(jwt, { name: "everything", scopes: all });
    for (const headers of [{ authorization: `Bearer ${token}` }, { "x-api-key": token }] as Record<string, string>[]) {
      expectError(await http(base, "POST", "/api/auth/tokens", { headers, body: { name: "child", scopes: ["usage:read"] } }), 403, "FORBIDDEN");
      expectError(await http(base, "POST", "/api/auth/api-keys", { headers }), 403, "FORBIDDEN");
      expectError(await http(base, "POST", "/api/auth/webhook-secret", { headers }), 403, "FORBIDDEN");
      expectError(await http(base, "GET", "/api/auth/tokens", { headers }), 403, "FORBIDDEN");
      expectError(await http(base, "GET", "/api/admin/nodes", { headers }), 403, "FORBIDDEN");
      expectError(await http(base, "GET", "/api/admin/accounts", { headers }), 403, "FORBIDDEN");
    }
    expect((await listed(jwt)).map((t) => t.name)).toEqual(["everything"]);
    expect((await http(base, "GET", "/api/auth/me", { token })).body).toMatchObject({ email: ADMIN_EMAIL, role: "admin" });
  });
});

describe("auth - a token's models", () => {
  beforeEach(() => {
    p.ollama.set({});
    p.vllm.set({});
  });

  it("auth - a model outside the list is 403 on /api/models/infer and OpenAI's permission_error on /v1; one inside answers", async () => {
    const jwt = await account();
    const { token } = await mint(jwt, { name: "llama only", scopes: ["inference"], models: ["llama3.2:1b"] });
    const infer = (model: string) => http(base, "POST", "/api/models/infer", { token, body: { model, prompt: "hi" } });
    expect((await infer("llama3.2:1b")).status).toBe(200);
    expectError(await infer("Qwen/Qwen2.5-7B-Instruct"), 403, "FORBIDDEN");
    const client = openAiClient(base, token);
    const refused = await openAiErrorOf(client.chat.completions.create({ model: "Qwen/Qwen2.5-7B-Instruct", messages: [{ role: "user", content: "hi" }] }));
    expect([refused.status, refused.type]).toEqual([403, "permission_error"]);
    const answer = await client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }] });
    expect(answer.model).toBe("llama3.2:1b");
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(["llama3.2:1b"]);
    const messages = await http(base, "POST", "/v1/messages", {
      headers: { "x-api-key": token },
      body: { model: "Qwen/Qwen2.5-7B-Instruct", max_tokens: 10, messages: [{ role: "user", content: "hi" }] },
    });
    expect([messages.status, messages.body.type, messages.body.error?.type]).toEqual([403, "error", "permission_error"]);
  });

  it("auth - a fallback outside the list never answers (a JWT's request falls back as configured)", async () => {
    const jwt = await account();
    const { token } = await mint(jwt, { name: "qwen small only", scopes: ["inference"], models: ["qwen2.5:0.5b"] });
    p.ollama.set({ fail: { status: 500, message: "model runner crashed" } });
    const vllmCalls = p.vllm.requests.length;
    const refused = await http(base, "POST", "/api/models/infer", { token, body: { model: "qwen2.5:0.5b", prompt: "hi" } });
    expect(refused.status).toBe(502);
    expect(p.vllm.requests.length).toBe(vllmCalls);
    const failed = await openAiErrorOf(
      openAiClient(base, token).chat.completions.create({ model: "qwen2.5:0.5b", messages: [{ role: "user", content: "hi" }] }),
    );
    expect(failed.status).toBe(502);
    expect(p.vllm.requests.length).toBe(vllmCalls);
    const viaJwt = await http(base, "POST", "/api/models/infer", { token: jwt, body: { model: "qwen2.5:0.5b", prompt: "hi" } });
    expect([viaJwt.status, viaJwt.body.model]).toEqual([200, "Qwen/Qwen2.5-7B-Instruct"]);
  });
});

describe("auth - a token's credits", () => {
  beforeEach(() => p.ollama.set({ promptTokens: 12, completionTokens: 4 }));

  it("auth - what it spends shows in creditsUsed and lastUsedAt and counts for the account; at maxCredits it is 403 tokenCredits", async () => {
    const jwt = await account();
    const made = await mint(jwt, { name: "budget", scopes: ["inference"], maxCredits: 20 });
    const infer = () => http(base, "POST", "/api/models/infer", { token: made.token, body: { model: "llama3.2:1b", prompt: "hi" } });
    expect((await infer()).status).toBe(200);
    const first = await waitFor(async () => (await listed(jwt)).find((t) => t.creditsUsed === 16 && t.lastUsedAt), { message: "16 credits used" });
    expect(Date.parse(first.lastUsedAt)).toBeGreaterThan(Date.now() - 60_000);
    expect((await infer()).status).toBe(200); // 16 < 20: still allowed
    await waitFor(async () => (await listed(jwt))[0].creditsUsed === 32, { message: "32 credits used" });
    const refused = await waitFor(
      async () => {
        const res = await infer();
        return res.status === 403 ? res : undefined;
      },
      { timeoutMs: 5_000, message: "the token refused at its limit" },
    );
    expect(refused.body.error).toMatchObject({ code: "QUOTA_EXCEEDED", details: { resource: "tokenCredits", limit: 20 } });
    await waitFor(async () => (await http(base, "GET", "/api/usage", { token: jwt })).body.inference.tokens >= 32, { message: "the account's usage" });
  });
});

describe("auth - a job's token", () => {
  it("auth - auth.issueJobToken's token works within its scopes and is listed with its jobId; auth.revokeJobTokens stops it", async () => {
    const jwt = await account();
    const me = (await http(base, "GET", "/api/auth/me", { token: jwt })).body;
    const jobId = randomUUID();
    const broker = p.platform.broker;
    const issued = await broker.call<{ id: string; token: string }, object>("auth.issueJobToken", {
      clientId: me.id,
      jobId,
      scopes: ["jobs:read"],
      expiresInSeconds: 600,
    });
    expect((await http(base, "GET", "/api/gpu/jobs", { token: issued.token })).status).toBe(200);
    expectError(await http(base, "GET", "/api/usage", { token: issued.token }), 403, "FORBIDDEN");
    expect(await listed(jwt)).toEqual([expect.objectContaining({ id: issued.id, name: `job ${jobId}`, jobId })]);
    expect(await broker.call("auth.revokeJobTokens", { jobId })).toEqual({ revoked: 1 });
    expectError(await http(base, "GET", "/api/gpu/jobs", { token: issued.token }), 401, "UNAUTHORIZED");
  });
});
