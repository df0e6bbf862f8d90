/**
 * Databases people can keep, through the HTTP gateway against the real tenant cluster: password
 * rotation, snapshots under /api/databases/:id/snapshots and /api/snapshots, a branch from one,
 * other accounts' 404s, bad input's 400s in the contract's error shape, and 503 (not 404) on the
 * /api/snapshots base while dbaas is not running.
 */
import { randomUUID } from "crypto";
import { existsSync, promises as fs } from "fs";
import os from "os";
import path from "path";
import { http, HttpResult, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";
import { startNatsPlatform } from "../support/nats-platform";
import { callerMeta, connectRefusal, psql, startDbaasPlatform, stopDbaasPlatform, tenantEnv, withClient } from "../integration/dbaas.helpers";

function expectError(res: HttpResult, status: number, code: string) {
  expect([res.status, res.body?.error?.code]).toEqual([status, code]);
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "details", "message"]);
}

async function register(base: string): Promise<string> {
  const res = await http(base, "POST", "/api/auth/register", {
    body: { email: `keep-${randomUUID()}@example.com`, name: "Keeper", password: "password-123" },
  });
  expect(res.status).toBe(201);
  return res.body.accessToken;
}

describe("databases keep api", () => {
  let platform: TestPlatform;
  let base: string;
  let owner: string;
  let other: string;

  beforeAll(async () => {
    platform = await startDbaasPlatform({ services: ["api-gateway", "auth", "dbaas"] });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/snapshots");
    await waitForRoute(base, "POST", "/api/auth/login");
    [owner, other] = await Promise.all([register(base), register(base)]);
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("databases keep api - rotate the password, snapshot, branch and delete the snapshot", async () => {
    const db = (await http(base, "POST", "/api/databases", { token: owner })).body;
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE notes (body text); INSERT INTO notes VALUES ('before the migration')"));

    const rotated = await http(base, "POST", `/api/databases/${db.id}/rotate-password`, { token: owner });
    expect(rotated.status).toBe(200);
    expect(Object.keys(rotated.body).sort()).toEqual(["connectionString", "id", "password", "username"]);
    expect(await connectRefusal(db.connectionString)).toBe("28P01");
    expect(psql(rotated.body.connectionString, "SELECT body FROM notes").stdout.trim()).toBe("before the migration");
    expect((await http(base, "GET", `/api/databases/${db.id}`, { token: owner })).text).not.toContain(rotated.body.password);

    const taken = await http(base, "POST", `/api/databases/${db.id}/snapshots`, { token: owner });
    expect(taken.status).toBe(202);
    expect(taken.headers.get("location")).toBe(`/api/snapshots/${taken.body.id}`);
    expect(taken.body).toMatchObject({ databaseId: db.id, databaseName: db.databaseName, status: "pending" });
    const ready = await waitFor(
      async () => {
        const res = await http(base, "GET", `/api/snapshots/${taken.body.id}`, { token: owner });
        return res.body.status === "ready" && res.body;
      },
      { timeoutMs: 30_000, message: "the snapshot to be ready" },
    );
    expect(ready.sizeMb).toBeGreaterThanOrEqual(0);
    expect((await http(base, "GET", "/api/snapshots", { token: owner })).body).toEqual({ snapshots: [ready] });

    const branch = await http(base, "POST", "/api/databases", { token: owner, body: { fromSnapshot: ready.id, maxStorageMb: 200 } });
    expect(branch.status).toBe(201);
    expect(psql(branch.body.connectionString, "SELECT body FROM notes").stdout.trim()).toBe("before the migration");
    expect((await http(base, "GET", `/api/databases/${branch.body.id}`, { token: owner })).body.maxStorageMb).toBe(200);

    // Another account: 404 for all of it, and nothing listed.
    expectError(await http(base, "POST", `/api/databases/${db.id}/rotate-password`, { token: other }), 404, "NOT_FOUND");
    expectError(await http(base, "POST", `/api/databases/${db.id}/snapshots`, { token: other }), 404, "NOT_FOUND");
    expectError(await http(base, "GET", `/api/snapshots/${ready.id}`, { token: other }), 404, "NOT_FOUND");
    expectError(await http(base, "DELETE", `/api/snapshots/${ready.id}`, { token: other }), 404, "NOT_FOUND");
    expectError(await http(base, "POST", "/api/databases", { token: other, body: { fromSnapshot: ready.id } }), 404, "NOT_FOUND");
    expect((await http(base, "GET", "/api/snapshots", { token: other })).body).toEqual({ snapshots: [] });
    expect((await http(base, "GET", "/api/databases", { token: other })).body).toEqual({ databases: [] });

    expect(await http(base, "DELETE", `/api/snapshots/${ready.id}`, { token: owner })).toMatchObject({
      status: 200,
      body: { message: `Snapshot ${ready.id} deleted` },
    });
    expectError(await http(base, "GET", `/api/snapshots/${ready.id}`, { token: owner }), 404, "NOT_FOUND");
  });

  it.each([
    ["GET", "/api/snapshots/not-a-uuid", 404, "NOT_FOUND"],
    ["DELETE", `/api/snapshots/${randomUUID()}`, 404, "NOT_FOUND"],
    ["POST", `/api/databases/${randomUUID()}/snapshots`, 404, "NOT_FOUND"],
    ["POST", "/api/databases/x/rotate-password", 404, "NOT_FOUND"],
  ] as const)("databases keep api - %s %s is %s", async (method, path, status, code) => {
    expectError(await http(base, method, path, { token: owner }), status, code);
  });

  it("databases keep api - without credentials every new route is 401", async () => {
    for (const [method, path] of [
      ["GET", "/api/snapshots"],
      ["POST", `/api/databases/${randomUUID()}/snapshots`],
      ["POST", `/api/databases/${randomUUID()}/rotate-password`],
    ] as const)
      expectError(await http(base, method, path), 401, "UNAUTHORIZED");
  });
});

describe("databases keep api without dbaas", () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform({ services: ["api-gateway", "auth"] });
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/login");
  });
  afterAll(() => platform.stop());

  it("databases keep api - /api/snapshots is 503 SERVICE_UNAVAILABLE while dbaas is down, like /api/databases", async () => {
    const token = await register(platform.baseUrl);
    for (const path of ["/api/snapshots", `/api/snapshots/${randomUUID()}`, "/api/databases"])
      expectError(await http(platform.baseUrl, "GET", path, { token }), 503, "SERVICE_UNAVAILABLE");
  });
});

describe("databases keep api across a crash", () => {
  it("databases keep api - a snapshot pending when dbaas is killed is failed at the next start, and its partial dump removed", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "keep-crash-"));
    // One process on its own in-process bus: gateway, auth and dbaas.
    const platform = await startNatsPlatform({
      transporter: "",
      env: tenantEnv({ DBAAS_SNAPSHOT_DIR: dir, DBAAS_SNAPSHOT_CONCURRENCY: "1" }),
      processes: [["api-gateway", "auth", "dbaas"]],
      work: dir,
    });
    const base = platform.baseUrl;
    const [child] = platform.children;
    let after: TestPlatform | undefined;
    try {
      await platform.waitFor(async () => (await http(base, "GET", "/api/databases").catch(() => undefined))?.status === 401, {
        timeoutMs: 30_000,
        message: "the platform to answer",
      });
      const reg = await http(base, "POST", "/api/auth/register", {
        body: { email: `crash-${randomUUID()}@example.com`, name: "Crash", password: "password-123" },
      });
      const token = reg.body.accessToken;
      const db = (await http(base, "POST", "/api/databases", { token })).body;
      await withClient(db.connectionString, (c) =>
        c.query("CREATE TABLE big AS SELECT g, md5(g::text) || md5((g * 3)::text) AS pad FROM generate_series(1, 600000) g"),
      );
      const snap = (await http(base, "POST", `/api/databases/${db.id}/snapshots`, { token })).body;
      const partial = path.join(dir, `${snap.id}.partial`);
      await waitFor(() => existsSync(partial), { timeoutMs: 30_000, message: "pg_dump to start writing" });
      await child.stop("SIGKILL");

      // The next dbaas on the same platform database and folder: its first reconcile (at start) settles it.
      after = await startTestPlatform({
        services: ["dbaas"],
        databaseUrl: platform.databaseUrl,
        dropDatabase: false,
        env: tenantEnv({ DBAAS_SNAPSHOT_DIR: dir }),
      });
      const meta = callerMeta(reg.body.client.id);
      const settled = await waitFor(
        async () => {
          // The record is failed first, then the dump removed: wait for both.
          const s = await after!.broker.call<{ status: string }, object>("dbaas.getSnapshot", { id: snap.id }, { meta });
          return s.status !== "pending" && !existsSync(partial) && s;
        },
        { timeoutMs: 30_000, message: "the abandoned snapshot to be settled" },
      );
      expect(settled.status).toBe("failed");
      expect(existsSync(path.join(dir, `${snap.id}.dump`))).toBe(false);
      await after.broker.call("dbaas.destroy", { id: db.id }, { meta });
    } finally {
      await after?.stop();
      await stopDbaasPlatform(platform);
    }
  });
});
