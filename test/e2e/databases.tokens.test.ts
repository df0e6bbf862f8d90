/**
 * A restricted token's databases, through the HTTP gateway against the real tenant cluster: a token
 * limited to one database sees only it (the other is 404 as another account's is, and missing from
 * the list), can snapshot it but not the other, and a token without a list sees every database of
 * its account; its scopes still apply.
 */
import { randomUUID } from "crypto";
import { http, HttpResult, TestPlatform, waitFor, waitForRoute } from "../support/platform";
import { startDbaasPlatform, stopDbaasPlatform } from "../integration/dbaas.helpers";

function expectError(res: HttpResult, status: number, code: string) {
  expect([res.status, res.body?.error?.code]).toEqual([status, code]);
}

describe("databases - a restricted token's databases", () => {
  let platform: TestPlatform;
  let base: string;
  let owner: string;
  let mine: { id: string };
  let theirs: { id: string };

  beforeAll(async () => {
    platform = await startDbaasPlatform({ services: ["api-gateway", "auth", "dbaas"] });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/databases");
    await waitForRoute(base, "POST", "/api/auth/register");
    const reg = await http(base, "POST", "/api/auth/register", { body: { email: `tokdb-${randomUUID()}@example.com`, name: "T", password: "password-123" } });
    owner = reg.body.accessToken;
    [mine, theirs] = [(await http(base, "POST", "/api/databases", { token: owner })).body, (await http(base, "POST", "/api/databases", { token: owner })).body];
  }, 120_000);
  afterAll(() => stopDbaasPlatform(platform));

  const mint = async (body: object) => (await http(base, "POST", "/api/auth/tokens", { token: owner, body: { name: "db", ...body } })).body.token as string;

  it("databases - a token limited to one database: the other is 404 on every route and missing from the list", async () => {
    const token = await mint({ scopes: ["databases:write"], databases: [mine.id.toUpperCase()] });
    expect((await http(base, "GET", `/api/databases/${mine.id}`, { token })).status).toBe(200);
    expect((await http(base, "GET", "/api/databases", { token })).body.databases.map((d: { id: string }) => d.id)).toEqual([mine.id]);
    expectError(await http(base, "GET", `/api/databases/${theirs.id}`, { token }), 404, "NOT_FOUND");
    expectError(await http(base, "POST", `/api/databases/${theirs.id}/rotate-password`, { token }), 404, "NOT_FOUND");
    expectError(await http(base, "POST", `/api/databases/${theirs.id}/snapshots`, { token }), 404, "NOT_FOUND");
    expectError(await http(base, "DELETE", `/api/databases/${theirs.id}`, { token }), 404, "NOT_FOUND");
    // Still there, for the account itself.
    expect((await http(base, "GET", `/api/databases/${theirs.id}`, { token: owner })).status).toBe(200);
  });

  it("databases - a snapshot of a database outside the list is 404 and left out of the list", async () => {
    const snap = await http(base, "POST", `/api/databases/${theirs.id}/snapshots`, { token: owner });
    expect(snap.status).toBe(202);
    const token = await mint({ scopes: ["databases:read"], databases: [mine.id] });
    expectError(await http(base, "GET", `/api/snapshots/${snap.body.id}`, { token }), 404, "NOT_FOUND");
    expect((await http(base, "GET", "/api/snapshots", { token })).body.snapshots).toEqual([]);
    await waitFor(async () => (await http(base, "GET", `/api/snapshots/${snap.body.id}`, { token: owner })).body.status !== "pending", { timeoutMs: 30_000 });
  });

  it("databases - a token without a list sees every database of the account; a read scope cannot write", async () => {
    const token = await mint({ scopes: ["databases:read"] });
    const ids = (await http(base, "GET", "/api/databases", { token })).body.databases.map((d: { id: string }) => d.id);
    expect(ids.sort()).toEqual([mine.id, theirs.id].sort());
    const refused = await http(base, "DELETE", `/api/databases/${mine.id}`, { token });
    expect([refused.status, refused.body.error.details]).toEqual([403, { missingScope: "databases:write" }]);
  });
});
