/**
 * Liveness/readiness of a real process: auth (a DbMixin service) on NATS, with PostgreSQL and
 * NATS reached through loopback proxies the test cuts and restores.
 */
import { healthAddress } from "../../lib/health";
import { ADMIN_PG_URL, http, NATS_URL, startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";
import { startTcpProxy, TcpProxy } from "../support/tcp-proxy";

type Probe = { status: number; body: { status: string; checks?: Record<string, { ok: boolean; error?: string }> } };

describe("ops - readiness follows PostgreSQL and NATS", () => {
  let pgProxy: TcpProxy;
  let natsProxy: TcpProxy;
  let platform: TestPlatform;
  let base: string;

  const probe = async (path: string): Promise<Probe> => {
    const res = await http(base, "GET", path);
    return { status: res.status, body: res.body };
  };
  const waitForReady = (ready: boolean, what: string) =>
    waitFor(
      async () => {
        const p = await probe("/ready");
        return (p.status === 200) === ready ? p : false;
      },
      { timeoutMs: 15_000, intervalMs: 100, message: `readiness ${ready ? 200 : 503} (${what})` },
    );

  beforeAll(async () => {
    const pg = new URL(ADMIN_PG_URL);
    const nats = new URL(NATS_URL);
    pgProxy = await startTcpProxy(pg.hostname, Number(pg.port || 5432));
    natsProxy = await startTcpProxy(nats.hostname, Number(nats.port || 4222));
    const databaseUrl = new URL(ADMIN_PG_URL);
    databaseUrl.port = String(pgProxy.port);
    databaseUrl.pathname = `/${uniqueName("ci_test")}`;
    platform = await startTestPlatform({
      services: ["auth"],
      databaseUrl: databaseUrl.toString(),
      transporter: `nats://127.0.0.1:${natsProxy.port}`,
      env: { READY_CHECK_TIMEOUT_MS: "500" },
    });
    const address = await waitFor(() => healthAddress(platform.broker), { message: "health server" });
    base = `http://127.0.0.1:${address.port}`;
  });

  afterAll(async () => {
    await pgProxy?.start().catch(() => undefined);
    await natsProxy?.start().catch(() => undefined);
    await platform?.stop();
    await pgProxy?.stop();
    await natsProxy?.stop();
  });

  it("ops - a started process is live and ready, naming its checks", async () => {
    const live = await probe("/live");
    expect(live.status).toBe(200);
    expect(live.body.status).toBe("ok");
    const ready = await waitForReady(true, "start");
    expect(ready.body.checks).toMatchObject({
      broker: { ok: true },
      dependencies: { ok: true },
      transporter: { ok: true },
      "auth.postgres": { ok: true },
    });
    expect((await probe("/nope")).status).toBe(404);
  });

  it("ops - PostgreSQL going away makes the process unready (still live), and coming back ready again", async () => {
    await pgProxy.stop();
    const down = await waitForReady(false, "PostgreSQL down");
    expect(down.status).toBe(503);
    expect(down.body.status).toBe("not ready");
    expect(down.body.checks!["auth.postgres"].ok).toBe(false);
    expect(down.body.checks!.transporter.ok).toBe(true);
    expect((await probe("/live")).status).toBe(200);

    await pgProxy.start();
    const up = await waitForReady(true, "PostgreSQL back");
    expect(up.body.checks!["auth.postgres"].ok).toBe(true);
  });

  it("ops - NATS going away makes the process unready, and reconnecting ready again", async () => {
    await natsProxy.stop();
    const down = await waitForReady(false, "NATS down");
    expect(down.body.checks!.transporter.ok).toBe(false);
    expect(down.body.checks!["auth.postgres"].ok).toBe(true);
    expect((await probe("/live")).status).toBe(200);

    await natsProxy.start();
    const up = await waitForReady(true, "NATS back");
    expect(up.body.checks!.transporter.ok).toBe(true);
  });
});
