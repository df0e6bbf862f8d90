/**
 * Restricted tokens in the auth service, on a ServiceBroker against the real PostgreSQL: the
 * internal actions gpu-scheduler calls for a job's token (issue, revoke), the gateway's resolve by
 * SHA-256, and the last-use times written in batches.
 */
import { randomUUID } from "crypto";
import { ServiceBroker } from "moleculer";
import { signedCallerMeta } from "../../lib/caller-keys";
import { newPool } from "../../lib/db";
import { hashApiKey, RESTRICTED_TOKEN_PATTERN } from "../../services/auth/api-keys";
import { startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";

let platform: TestPlatform;
let broker: ServiceBroker;

beforeAll(async () => {
  platform = await startTestPlatform({ services: ["auth"], env: { AUTH_RATE_LIMIT_PER_IP: "10000" } });
  broker = platform.broker;
});
afterAll(() => platform?.stop());

const call = (action: string, params: object, meta: object = {}) => broker.call(action, params, { meta }) as Promise<any>;
const resolve = (token: string) => call("auth.resolveToken", { tokenHash: hashApiKey(token) });

async function account(): Promise<{ id: string; meta: object }> {
  const reg = await call("auth.register", { email: `${uniqueName("tk")}@example.com`, name: "T", password: "password-123" }, { clientIp: uniqueName("ip") });
  return { id: reg.client.id, meta: signedCallerMeta({ clientId: reg.client.id, role: "client", via: "jwt" }) };
}

describe("auth - a job's restricted token (gpu-scheduler's internal actions)", () => {
  it("auth - issueJobToken makes a cit_ token with the job's limits, listed with its jobId; revokeJobTokens deletes it, idempotently", async () => {
    const owner = await account();
    const jobId = randomUUID();
    const database = randomUUID();
    const issued = await call("auth.issueJobToken", {
      clientId: owner.id,
      jobId,
      scopes: ["inference", "databases:write"],
      models: ["echo"],
      databases: [database],
      expiresInSeconds: 3600,
    });
    expect(issued.token).toMatch(RESTRICTED_TOKEN_PATTERN);
    expect(Object.keys(issued).sort()).toEqual(["id", "token"]);

    const resolved = await resolve(issued.token);
    expect(resolved.caller).toEqual({
      clientId: owner.id,
      role: "client",
      via: "token",
      token: { id: issued.id, scopes: ["inference", "databases:write"], models: ["echo"], databases: [database], jobId },
    });
    const { tokens } = await call("auth.listTokens", {}, owner.meta);
    expect(tokens).toEqual([expect.objectContaining({ id: issued.id, name: `job ${jobId}`, jobId, maxCredits: null, creditsUsed: 0 })]);
    expect(JSON.stringify(tokens)).not.toContain(issued.token);

    expect(await call("auth.revokeJobTokens", { jobId })).toEqual({ revoked: 1 });
    expect(await resolve(issued.token)).toBeNull();
    expect(await call("auth.revokeJobTokens", { jobId })).toEqual({ revoked: 0 });
    expect((await call("auth.listTokens", {}, owner.meta)).tokens).toEqual([]);
  });

  it("auth - job tokens are not counted in the account's 100 live tokens", async () => {
    const owner = await account();
    for (let i = 0; i < 100; i++) await call("auth.createToken", { name: `t${i}`, scopes: ["usage:read"] }, owner.meta);
    await expect(call("auth.createToken", { name: "one more", scopes: ["usage:read"] }, owner.meta)).rejects.toMatchObject({
      code: 403,
      type: "QUOTA_EXCEEDED",
      data: { resource: "tokens", limit: 100 },
    });
    const issued = await call("auth.issueJobToken", { clientId: owner.id, jobId: randomUUID(), scopes: ["jobs:read"], expiresInSeconds: 60 });
    expect(issued.token).toMatch(RESTRICTED_TOKEN_PATTERN);
  });

  it("auth - bad params are refused and nothing is issued", async () => {
    const owner = await account();
    const good = { clientId: owner.id, jobId: randomUUID(), scopes: ["inference"], expiresInSeconds: 600 };
    for (const bad of [
      { ...good, jobId: "not-a-uuid" },
      { ...good, scopes: ["root"] },
      { ...good, scopes: [] },
      { ...good, expiresInSeconds: 10 },
      { ...good, databases: ["db-1"] },
    ])
      await expect(call("auth.issueJobToken", bad)).rejects.toMatchObject({ code: 422 });
    await expect(call("auth.issueJobToken", { ...good, clientId: randomUUID() })).rejects.toMatchObject({ code: 404 });
    expect((await call("auth.listTokens", {}, owner.meta)).tokens).toEqual([]);
  });
});

describe("auth - restricted tokens", () => {
  it("auth - an expired token resolves to nothing, and its row goes when the account makes another", async () => {
    const owner = await account();
    const created = await call("auth.createToken", { name: "short", scopes: ["inference"], expiresInSeconds: 60 }, owner.meta);
    expect(await resolve(created.token)).not.toBeNull();
    // Its expiry moved into the past: the database's clock decides.
    const pool = newPool({ connectionString: platform.databaseUrl });
    await pool.query("UPDATE auth.tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [created.id]);
    expect(await resolve(created.token)).toBeNull();
    // The account's next token drops the expired row.
    await call("auth.createToken", { name: "next", scopes: ["inference"] }, owner.meta);
    expect((await pool.query("SELECT id FROM auth.tokens WHERE id = $1", [created.id])).rowCount).toBe(0);
    await pool.end();
  });

  it("auth - resolving a token records when it was last used, written in a batch", async () => {
    const owner = await account();
    const created = await call("auth.createToken", { name: "used", scopes: ["jobs:read"] }, owner.meta);
    const listed = async () => (await call("auth.listTokens", {}, owner.meta)).tokens[0];
    expect((await listed()).lastUsedAt).toBeNull();
    const before = Date.now();
    await resolve(created.token);
    const used = await waitFor(async () => (await listed()).lastUsedAt, { timeoutMs: 10_000, message: "lastUsedAt to be written" });
    expect(Date.parse(used)).toBeGreaterThanOrEqual(before - 1000);
  });

  it("auth - another account's token id is 404 on delete and the token keeps working", async () => {
    const owner = await account();
    const other = await account();
    const created = await call("auth.createToken", { name: "mine", scopes: ["inference"] }, owner.meta);
    await expect(call("auth.deleteToken", { id: created.id }, other.meta)).rejects.toMatchObject({ code: 404 });
    await expect(call("auth.deleteToken", { id: "nope" }, owner.meta)).rejects.toMatchObject({ code: 404 });
    expect(await resolve(created.token)).not.toBeNull();
    expect(await call("auth.deleteToken", { id: created.id }, owner.meta)).toEqual({ message: "Token deleted" });
    expect(await resolve(created.token)).toBeNull();
  });
});
