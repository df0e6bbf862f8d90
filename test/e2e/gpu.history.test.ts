/**
 * GET /api/gpu/status/history through the gateway (beyond the contract, docs/jobs.md): a simulated
 * node's heartbeats (this broker, as a gpu-node sends them) become one sample per card per
 * bucket, with the Prometheus endpoint off; credentials and scopes as GET /api/gpu/status; an
 * unknown query field refused; forged and malformed heartbeats ignored; 503 while the metrics
 * service is not running.
 */
import { HEARTBEAT_EVENT, NodeHeartbeat } from "../../lib/gpu-protocol";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const ROUTE = "/api/gpu/status/history";

describe("gpu history - the cluster's last window through the gateway", () => {
  let platform: TestPlatform;
  let token: string;
  const history = (as = token, path = ROUTE) => http(platform.baseUrl, "GET", path, { token: as });
  const heartbeat = (utilization: number, memoryUsed: number): NodeHeartbeat => ({
    nodeId: platform.broker.nodeID,
    executor: "process",
    runningJobIds: [],
    at: new Date().toISOString(),
    cards: [{ uuid: "GPU-hist-0", index: 0, name: "Test GPU", memoryTotal: 1024, memoryUsed, utilization, temperature: 40 }],
  });

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "metrics"],
      env: { METRICS_PORT: "off", METRICS_HISTORY_BUCKET_S: "1", METRICS_HISTORY_WINDOW_S: "60" },
    });
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/register");
    await waitForRoute(platform.baseUrl, "GET", ROUTE);
    const email = `history-${Date.now()}@example.com`;
    token = (await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, name: "H", password: "correct horse" } })).body.accessToken;
  });

  afterAll(() => platform?.stop());

  it("gpu history - empty before any heartbeat; the bucket and window say what a sample is", async () => {
    const res = await history();
    expect([res.status, res.body]).toEqual([200, { bucketSeconds: 1, windowSeconds: 60, gpus: [] }]);
  });

  it("gpu history - heartbeats become one sample per bucket, oldest first; forged and malformed ones are ignored", async () => {
    const started = Date.now();
    await platform.broker.emit(HEARTBEAT_EVENT, { nodeId: "broken", cards: [{ uuid: 1 }] }); // refused, never thrown
    await platform.broker.emit(HEARTBEAT_EVENT, { ...heartbeat(99, 1000), nodeId: "gpu-host-forged" }); // another node's id
    // A heartbeat per poll, until two buckets hold one.
    let n = 0;
    const body = await waitFor(
      async () => {
        n += 1;
        await platform.broker.emit(HEARTBEAT_EVENT, heartbeat(n % 2 ? 40 : 60, 512));
        const res = await history();
        return res.body.gpus[0]?.samples.length >= 2 ? res.body : undefined;
      },
      { intervalMs: 200, message: "samples in two buckets" },
    );
    expect(body.gpus.map((g: { uuid: string }) => g.uuid)).toEqual(["GPU-hist-0"]);
    const samples = body.gpus[0].samples as Array<{ at: string; utilization: number; memoryUsed: number; memoryTotal: number }>;
    const starts = samples.map((s) => Date.parse(s.at));
    expect(starts).toEqual([...starts].sort((a, b) => a - b));
    expect(starts[0]).toBeGreaterThanOrEqual(started - 1000);
    for (const s of samples) {
      expect(Date.parse(s.at) % 1000).toBe(0); // the start of its bucket
      expect(s.utilization).toBeGreaterThanOrEqual(40);
      expect(s.utilization).toBeLessThanOrEqual(60); // the mean of 40s and 60s: never the forged 99
      expect([s.memoryUsed, s.memoryTotal]).toEqual([512, 1024]);
    }
  });

  it("gpu history - credentials and scopes as GET /api/gpu/status; an unknown query field is 400 naming it", async () => {
    expect((await history("")).status).toBe(401);
    expect((await history("not-a-token")).status).toBe(401);
    const mint = async (scopes: string[]) =>
      (await http(platform.baseUrl, "POST", "/api/auth/tokens", { token, body: { name: `t-${scopes.join("-")}`, scopes } })).body.token as string;
    const refused = await history(await mint(["inference"]));
    expect([refused.status, refused.body.error.code, refused.body.error.details]).toEqual([403, "FORBIDDEN", { missingScope: "jobs:read" }]);
    const allowed = await history(await mint(["jobs:read"]));
    expect([allowed.status, allowed.body.gpus.length]).toEqual([200, 1]);
    const unknown = await history(token, `${ROUTE}?since=2026-01-01T00:00:00Z`);
    expect([unknown.status, unknown.body.error.code, unknown.body.error.details.map((d: { field: string }) => d.field)]).toEqual([
      400,
      "VALIDATION_FAILED",
      ["since"],
    ]);
  });

  it("gpu history - while the metrics service is not running: 503 SERVICE_UNAVAILABLE, a clear error", async () => {
    await platform.broker.destroyService("metrics");
    const res = await waitFor(
      async () => {
        const r = await history();
        return r.status === 503 ? r : undefined;
      },
      { message: "503 once metrics is gone" },
    );
    expect(res.body.error).toEqual({ code: "SERVICE_UNAVAILABLE", message: "Service temporarily unavailable, retry later", details: null });
  });
});
