/**
 * Databases and the usage service through the gateway (dbaas on the tenant PostgreSQL): a create
 * at the account's databases or storageMb quota (admin overrides) is 403 QUOTA_EXCEEDED with its
 * details and creates nothing; storage MB-hours in GET /api/usage are exactly the measured size
 * held over the sampled hour, cut by a window, and a later sample of the same hour counts nothing;
 * a ready snapshot counts in GET /api/quotas storageMb used (after its database is gone too), and
 * no longer once deleted. QUOTA_CACHE_MS=0: each create asks the ledger.
 */
import { randomUUID } from "crypto";
import { Client } from "pg";
import { http, uniqueName, waitFor, waitForRoute, TestPlatform } from "../support/platform";
import { startDbaasPlatform, stopDbaasPlatform } from "../integration/dbaas.helpers";

const ADMIN_EMAIL = `${uniqueName("root")}@example.com`;
const MIB = 1024 * 1024;

describe("usage and databases - quotas and storage MB-hours through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let admin: string;
  const register = async (email = `db-${randomUUID()}@example.com`) => {
    const res = await http(base, "POST", "/api/auth/register", { body: { email, name: "d", password: "correct horse battery" } });
    return { token: res.body.accessToken as string, id: res.body.client.id as string };
  };
  const put = async (id: string, body: unknown) =>
    expect((await http(base, "PUT", `/api/admin/accounts/${id}/quotas`, { token: admin, body })).status).toBe(200);
  const listed = async (token: string) => (await http(base, "GET", "/api/databases", { token })).body.databases.map((d: any) => d.id);
  const query = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const c = new Client({ connectionString: platform.databaseUrl });
    await c.connect();
    try {
      return (await c.query(sql, params)).rows as T[];
    } finally {
      await c.end();
    }
  };

  beforeAll(async () => {
    platform = await startDbaasPlatform({
      services: ["api-gateway", "auth", "dbaas", "usage", "admin"],
      env: { QUOTA_CACHE_MS: "0", ADMIN_EMAILS: ADMIN_EMAIL, DBAAS_USAGE_SAMPLE_S: "3600" },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/databases");
    await waitForRoute(base, "GET", "/api/quotas");
    admin = (await register(ADMIN_EMAIL)).token;
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("usage and databases - at the databases override a create is 403 with {resource, limit, used} and creates nothing", async () => {
    const user = await register();
    await put(user.id, { databases: 1 });
    const first = await http(base, "POST", "/api/databases", { token: user.token });
    expect(first.status).toBe(201);
    const refused = await http(base, "POST", "/api/databases", { token: user.token });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toEqual({
      code: "QUOTA_EXCEEDED",
      message: expect.stringContaining("databases"),
      details: { resource: "databases", limit: 1, used: 1 },
    });
    expect(await listed(user.token)).toEqual([first.body.id]);
    expect(await query("SELECT id FROM dbaas.databases WHERE client_id = $1", [user.id])).toHaveLength(1);
    const quota = (await http(base, "GET", "/api/quotas", { token: user.token })).body.quotas.find((q: any) => q.resource === "databases");
    expect(quota).toEqual({ resource: "databases", period: null, limit: 1, used: 1, resetsAt: null });
    expect((await http(base, "DELETE", `/api/databases/${first.body.id}`, { token: user.token })).status).toBe(200);
  });

  it("usage and databases - at the storageMb override a create is 403 naming storageMb and creates nothing", async () => {
    const user = await register();
    const first = await http(base, "POST", "/api/databases", { token: user.token });
    expect(first.status).toBe(201);
    await platform.broker.call("dbaas.checkQuota"); // measures the new database's size now
    const used = (await http(base, "GET", "/api/quotas", { token: user.token })).body.quotas.find((q: any) => q.resource === "storageMb").used;
    expect(used).toBeGreaterThan(0);
    await put(user.id, { storageMb: Math.floor(used) }); // at or under what it holds
    const refused = await http(base, "POST", "/api/databases", { token: user.token });
    expect([refused.status, refused.body.error.code]).toEqual([403, "QUOTA_EXCEEDED"]);
    expect(refused.body.error.details).toEqual({ resource: "storageMb", limit: Math.floor(used), used });
    expect(await listed(user.token)).toEqual([first.body.id]);
    await put(user.id, { storageMb: null });
    expect((await http(base, "DELETE", `/api/databases/${first.body.id}`, { token: user.token })).status).toBe(200);
  });

  it("usage and databases - storage MB-hours are the measured size held over the sampled hour, cut exactly by a window; a second sample counts nothing", async () => {
    const user = await register();
    const created = await http(base, "POST", "/api/databases", { token: user.token });
    expect(created.status).toBe(201);
    await platform.broker.call("dbaas.checkQuota");
    await platform.broker.call("dbaas.sampleUsage");
    const [db] = await query<{ bytes: string; created_at: Date }>("SELECT storage_bytes::text AS bytes, created_at FROM dbaas.databases WHERE id = $1", [
      created.body.id,
    ]);
    // The hour sampled: the one whose record the ledger stored for this database.
    const [rec] = await waitFor(
      async () => {
        const rows = await query<{ ended_at: Date }>("SELECT ended_at FROM usage.records WHERE key LIKE $1", [`storage:${created.body.id}:%`]);
        return rows.length ? rows : false;
      },
      { message: "the storage sample in the ledger" },
    );
    const hourEnd = rec.ended_at.getTime();
    const start = Math.max(db.created_at.getTime(), hourEnd - 3600_000);
    const mb = Number(db.bytes) / MIB;
    const usage = async (from: number, to: number) =>
      (await http(base, "GET", `/api/usage?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`, { token: user.token })).body.databases;
    const whole = await usage(hourEnd - 3600_000, hourEnd);
    expect(whole.storageMbHours).toBeCloseTo((mb * (hourEnd - start)) / 3600_000, 3);
    expect(whole.active).toBe(1);
    const mid = start + (hourEnd - start) / 2;
    expect((await usage(mid, hourEnd)).storageMbHours).toBeCloseTo((mb * (hourEnd - mid)) / 3600_000, 3);
    // Another sample of the same hour (a later round, another replica) is ignored by its key.
    await platform.broker.call("dbaas.sampleUsage");
    expect(await query("SELECT key FROM usage.records WHERE key LIKE $1", [`storage:${created.body.id}:%`])).toHaveLength(1);
    expect((await usage(hourEnd - 3600_000, hourEnd)).storageMbHours).toBe(whole.storageMbHours);
    expect((await http(base, "DELETE", `/api/databases/${created.body.id}`, { token: user.token })).status).toBe(200);
  });

  it("usage and databases - a ready snapshot raises the account's storageMb used, its database gone or not; deleting it lowers it", async () => {
    const user = await register();
    const storageUsed = async () =>
      (await http(base, "GET", "/api/quotas", { token: user.token })).body.quotas.find((q: any) => q.resource === "storageMb").used as number;
    const db = await http(base, "POST", "/api/databases", { token: user.token });
    expect(db.status).toBe(201);
    const taken = await http(base, "POST", `/api/databases/${db.body.id}/snapshots`, { token: user.token });
    expect(taken.status).toBe(202);
    const ready = await waitFor(
      async () => {
        const s = (await http(base, "GET", `/api/snapshots/${taken.body.id}`, { token: user.token })).body;
        if (s.status === "failed") throw new Error(`snapshot failed: ${JSON.stringify(s)}`);
        return s.status === "ready" ? s : false;
      },
      { timeoutMs: 60_000, message: "the snapshot ready" },
    );
    const [{ bytes }] = await query<{ bytes: string }>("SELECT size_bytes::text AS bytes FROM dbaas.snapshots WHERE id = $1", [ready.id]);
    expect(Number(bytes)).toBeGreaterThan(0);
    // The database's own size is measured apart; with it destroyed, what is left is the snapshot alone.
    expect((await http(base, "DELETE", `/api/databases/${db.body.id}`, { token: user.token })).status).toBe(200);
    expect(await storageUsed()).toBe(Math.round((Number(bytes) / MIB) * 100) / 100);
    expect(await storageUsed()).toBeGreaterThan(0);
    // Another account's storage is not touched by it.
    const other = await register();
    const otherUsed = (await http(base, "GET", "/api/quotas", { token: other.token })).body.quotas.find((q: any) => q.resource === "storageMb").used;
    expect(otherUsed).toBe(0);
    expect((await http(base, "DELETE", `/api/snapshots/${ready.id}`, { token: user.token })).status).toBe(200);
    expect(await storageUsed()).toBe(0);
  }, 90_000);
});
