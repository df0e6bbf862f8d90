/**
 * Databases through the HTTP gateway (spec 4.11–4.14), against the real tenant cluster: shapes,
 * the returned connection string, ownership, the per-account limit, malformed input, destroy;
 * and once with dbaas in its own process over NATS.
 */
import { randomUUID } from "crypto";
import { http, HttpResult, TestPlatform, waitForRoute } from "../support/platform";
import type { NatsPlatform } from "../support/nats-platform";
import { connectRefusal, startDbaasNatsPlatform, startDbaasPlatform, stopDbaasPlatform, withClient } from "../integration/dbaas.helpers";

const CREATED_KEYS = ["connectionString", "databaseName", "host", "id", "password", "port", "username"];
const DETAIL_KEYS = ["createdAt", "databaseName", "extensions", "host", "id", "maxStorageMb", "port", "readOnly", "status", "storageMb", "username"];
const LIMIT = 3;

function expectError(res: HttpResult, status: number, code: string) {
  expect([res.status, res.body?.error?.code]).toEqual([status, code]);
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "details", "message"]);
}

async function register(base: string): Promise<{ token: string; clientId: string }> {
  const res = await http(base, "POST", "/api/auth/register", {
    body: { email: `db-${randomUUID()}@example.com`, name: "Databases", password: "password-123" },
  });
  expect(res.status).toBe(201);
  return { token: res.body.accessToken, clientId: res.body.client.id };
}

describe("databases api", () => {
  let platform: TestPlatform;
  let base: string;
  let owner: { token: string; clientId: string };
  let other: { token: string; clientId: string };
  const list = (token: string) => http(base, "GET", "/api/databases", { token });

  beforeAll(async () => {
    platform = await startDbaasPlatform({ services: ["api-gateway", "auth", "dbaas"], env: { DBAAS_MAX_PER_ACCOUNT: String(LIMIT) } });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/databases");
    await waitForRoute(base, "POST", "/api/auth/login");
    [owner, other] = await Promise.all([register(base), register(base)]);
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("databases api - provision, use, inspect, list and destroy", async () => {
    const created = await http(base, "POST", "/api/databases", { token: owner.token });
    expect(created.status).toBe(201);
    const db = created.body;
    expect(Object.keys(db).sort()).toEqual(CREATED_KEYS);
    expect(created.headers.get("location")).toBe(`/api/databases/${db.id}`);
    expect(db.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(db.databaseName).toMatch(new RegExp(`^client_${owner.clientId.slice(0, 8)}_[0-9a-f]{8}$`));
    expect(db.username).toMatch(/^user_[0-9a-f]{12}$/);
    expect(db.password).toMatch(/^[A-Za-z0-9]{32,}$/);
    expect(Number.isInteger(db.port)).toBe(true);
    expect(db.connectionString).toBe(`postgresql://${db.username}:${db.password}@${db.host}:${db.port}/${db.databaseName}`);

    await withClient(db.connectionString, async (c) => {
      await c.query("CREATE TABLE todo (id serial PRIMARY KEY, title text); INSERT INTO todo (title) VALUES ('ship it')");
      expect((await c.query("SELECT title FROM todo")).rows).toEqual([{ title: "ship it" }]);
    });

    const detail = await http(base, "GET", `/api/databases/${db.id}`, { token: owner.token });
    expect(detail.status).toBe(200);
    expect(Object.keys(detail.body).sort()).toEqual(DETAIL_KEYS);
    expect(detail.body).toMatchObject({
      id: db.id,
      status: "active",
      databaseName: db.databaseName,
      host: db.host,
      port: db.port,
      username: db.username,
      maxStorageMb: 1024,
      readOnly: false,
    });
    expect(detail.body.storageMb).toBeGreaterThan(0);
    expect(new Date(detail.body.createdAt).toISOString()).toBe(detail.body.createdAt);
    expect(detail.text).not.toContain(db.password);

    const second = await http(base, "POST", "/api/databases", { token: owner.token });
    expect(second.status).toBe(201);
    const listed = await list(owner.token);
    expect(listed.status).toBe(200);
    expect(Object.keys(listed.body)).toEqual(["databases"]);
    expect(listed.body.databases.map((d: { id: string }) => d.id)).toEqual([second.body.id, db.id]); // newest first
    for (const d of listed.body.databases) expect(Object.keys(d).sort()).toEqual(DETAIL_KEYS);
    expect(listed.text).not.toContain(db.password);
    expect(listed.text).not.toContain("connectionString");

    for (const d of [db, second.body]) {
      const destroyed = await http(base, "DELETE", `/api/databases/${d.id}`, { token: owner.token });
      expect([destroyed.status, destroyed.body]).toEqual([200, { message: `Database ${d.databaseName} destroyed` }]);
    }
    expectError(await http(base, "DELETE", `/api/databases/${db.id}`, { token: owner.token }), 404, "NOT_FOUND");
    expectError(await http(base, "GET", `/api/databases/${db.id}`, { token: owner.token }), 404, "NOT_FOUND");
    expect(await connectRefusal(db.connectionString)).toBe("28P01");
    expect((await list(owner.token)).body).toEqual({ databases: [] });
  });

  it("databases api - another account's database is 404 everywhere and never listed", async () => {
    const db = (await http(base, "POST", "/api/databases", { token: owner.token })).body;
    try {
      expectError(await http(base, "GET", `/api/databases/${db.id}`, { token: other.token }), 404, "NOT_FOUND");
      expectError(await http(base, "DELETE", `/api/databases/${db.id}`, { token: other.token }), 404, "NOT_FOUND");
      expect((await list(other.token)).body).toEqual({ databases: [] });
      expect((await http(base, "GET", `/api/databases/${db.id}`, { token: owner.token })).status).toBe(200); // untouched
    } finally {
      await http(base, "DELETE", `/api/databases/${db.id}`, { token: owner.token });
    }
  });

  it("databases api - an API key works like a JWT; no credentials is 401", async () => {
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: owner.token })).body.apiKey;
    expect((await http(base, "GET", "/api/databases", { headers: { "x-api-key": key } })).status).toBe(200);
    expect((await http(base, "GET", "/api/databases", { token: key })).status).toBe(200);
    for (const [method, path] of [
      ["POST", "/api/databases"],
      ["GET", "/api/databases"],
      ["GET", `/api/databases/${randomUUID()}`],
      ["DELETE", `/api/databases/${randomUUID()}`],
    ])
      expectError(await http(base, method, path), 401, "UNAUTHORIZED");
  });

  it.each([
    ["not a UUID", "not-a-uuid"],
    ["a number", "42"],
    ["SQL", encodeURIComponent("' OR 1=1 --")],
    ["a UUID with a suffix", `${randomUUID()}x`],
    ["an unknown UUID", randomUUID()],
  ])("databases api - %s as :id is 404 Database not found", async (_name, id) => {
    for (const method of ["GET", "DELETE"]) {
      const res = await http(base, method, `/api/databases/${id}`, { token: owner.token });
      expectError(res, 404, "NOT_FOUND");
      expect(res.body.error.message).toBe("Database not found");
    }
  });

  it.each([
    ["malformed JSON", { rawBody: "{nope", headers: { "content-type": "application/json" } }, 400, "INVALID_JSON"],
    ["a JSON array", { rawBody: "[]", headers: { "content-type": "application/json" } }, 400, "INVALID_JSON"],
    ["a JSON string", { rawBody: '"db"', headers: { "content-type": "application/json" } }, 400, "INVALID_JSON"],
    ["form data", { rawBody: "name=x", headers: { "content-type": "application/x-www-form-urlencoded" } }, 415, "UNSUPPORTED_MEDIA_TYPE"],
    ["text", { rawBody: "hello", headers: { "content-type": "text/plain" } }, 415, "UNSUPPORTED_MEDIA_TYPE"],
    ["over 1 MiB", { body: { pad: "x".repeat(1024 * 1024 + 10) } }, 413, "PAYLOAD_TOO_LARGE"],
  ])("databases api - POST with %s is refused and creates nothing", async (_name, opts, status, code) => {
    expectError(await http(base, "POST", "/api/databases", { token: other.token, ...opts }), status, code);
    expect((await list(other.token)).body).toEqual({ databases: [] });
  });

  it.each([
    ["maxStorageMb over DBAAS_MAX_STORAGE_MB", { maxStorageMb: 999999 }],
    ["maxStorageMb as text", { maxStorageMb: "100" }],
    ["maxStorageMb 0", { maxStorageMb: 0 }],
    ["fromSnapshot as a number", { fromSnapshot: 5 }],
    ["restoreFrom as text", { restoreFrom: "yesterday" }],
    ["restoreFrom without a timestamp", { restoreFrom: { databaseId: "39bd8187-0000-4000-8000-000000000000" } }],
    ["restoreFrom with a field it does not know", { restoreFrom: { databaseId: "x", timestamp: "2026-11-27T15:04:05Z", at: 1 } }],
  ])("databases api - POST with %s is 400 VALIDATION_FAILED and creates nothing", async (_name, body) => {
    const res = await http(base, "POST", "/api/databases", { token: other.token, body });
    expectError(res, 400, "VALIDATION_FAILED");
    expect(res.body.error.details).toEqual([expect.objectContaining({ field: expect.stringMatching(new RegExp(`^${Object.keys(body)[0]}`)) })]);
    expect((await list(other.token)).body).toEqual({ databases: [] });
  });

  it("databases api - other fields sent in the body are 400 naming them (names are always generated), and nothing is made", async () => {
    const before = (await list(other.token)).body;
    const res = await http(base, "POST", "/api/databases", {
      token: other.token,
      body: { databaseName: 'x"; DROP DATABASE postgres; --', username: "postgres", password: "chosen" },
    });
    expectError(res, 400, "VALIDATION_FAILED");
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(["databaseName", "username", "password"]);
    expect((await list(other.token)).body).toEqual(before);
  });

  it("databases api - over the per-account limit is 403 QUOTA_EXCEEDED until one is destroyed", async () => {
    const made = [];
    for (let i = 0; i < LIMIT; i++) {
      const res = await http(base, "POST", "/api/databases", { token: other.token });
      expect(res.status).toBe(201);
      made.push(res.body);
    }
    try {
      expectError(await http(base, "POST", "/api/databases", { token: other.token }), 403, "QUOTA_EXCEEDED");
      expect((await list(other.token)).body.databases).toHaveLength(LIMIT);
      expect((await http(base, "DELETE", `/api/databases/${made[0].id}`, { token: other.token })).status).toBe(200);
      const again = await http(base, "POST", "/api/databases", { token: other.token });
      expect(again.status).toBe(201);
      made.push(again.body);
    } finally {
      for (const d of made.slice(1)) await http(base, "DELETE", `/api/databases/${d.id}`, { token: other.token });
    }
  });
});

describe("databases api - over NATS", () => {
  let platform: NatsPlatform;

  beforeAll(async () => {
    platform = await startDbaasNatsPlatform({ local: ["api-gateway", "auth"] });
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("databases api - dbaas in its own process provisions and destroys over NATS", async () => {
    platform.spawn(["dbaas"]);
    const base = platform.baseUrl;
    await platform.waitFor(async () => (await http(base, "GET", "/api/databases")).status === 401, {
      timeoutMs: 30_000,
      message: "dbaas to be routed over NATS",
    });
    await platform.waitForRoute("POST", "/api/auth/login");
    const { token } = await register(base);
    const db = await http(base, "POST", "/api/databases", { token });
    expect(db.status).toBe(201);
    await withClient(db.body.connectionString, (c) => c.query("CREATE TABLE t (x int)"));
    const destroyed = await http(base, "DELETE", `/api/databases/${db.body.id}`, { token });
    expect(destroyed.body).toEqual({ message: `Database ${db.body.databaseName} destroyed` });
  });
});
