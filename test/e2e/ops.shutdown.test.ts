/**
 * SIGTERM drains the gateway: a gateway process (child, over NATS) receives SIGTERM while a slow
 * request is in flight; it turns unready, stops accepting connections, still answers the request
 * in flight with 200, and exits 0.
 */
import { Context, ServiceBroker } from "moleculer";
import { http, NATS_URL, uniqueName, waitFor, waitForRoute, ChildService, freePort } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

describe("ops - graceful shutdown", () => {
  let platform: NatsPlatform;
  let backend: ServiceBroker;
  let gateway: ChildService | undefined;
  let entered = 0;
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));

  beforeAll(async () => {
    // The slow action lives in this process, so only the gateway is the one being stopped.
    platform = await startNatsPlatform();
    backend = new ServiceBroker({ namespace: platform.namespace, nodeID: uniqueName("backend"), transporter: NATS_URL, logger: false });
    backend.createService({
      name: "ops-test",
      settings: { rest: "/ops-test" },
      actions: {
        ping: { rest: "GET /ping", auth: "public", handler: () => ({ pong: true }) },
        slow: {
          rest: "GET /slow",
          auth: "public",
          async handler(ctx: Context) {
            entered += 1;
            await released;
            return { done: true, requestId: ctx.requestID };
          },
        },
      },
    } as never);
    await backend.start();
  });

  afterAll(async () => {
    release();
    await platform?.stop();
    await backend?.stop();
  });

  it("ops - SIGTERM lets an in-flight request finish with 200, refuses new ones, and exits 0", async () => {
    const healthPort = await freePort();
    gateway = platform.spawn(["api-gateway"], { HEALTH_PORT: String(healthPort), LOG_FORMAT: "json", LOG_LEVEL: "info" });
    const base = platform.baseUrl;
    const health = `http://127.0.0.1:${healthPort}`;
    await waitForRoute(base, "GET", "/api/ops-test/ping", 30_000);
    await waitFor(async () => (await http(health, "GET", "/ready")).status === 200, { message: "gateway ready" });

    const inFlight = http(base, "GET", "/api/ops-test/slow", { headers: { "x-request-id": "drain-test-1" } });
    await waitFor(() => entered === 1, { message: "slow request reached the service" });

    gateway.proc.kill("SIGTERM");
    const unready = await waitFor(
      async () => {
        const res = await http(health, "GET", "/ready");
        return res.status === 503 ? res : false;
      },
      { message: "gateway unready after SIGTERM" },
    );
    expect(unready.body.checks.broker).toEqual({ ok: false, error: "draining" });
    // No new connection is accepted while the old request is still being served.
    await waitFor(
      async () => {
        try {
          await http(base, "GET", "/api/ops-test/ping");
          return false;
        } catch {
          return true;
        }
      },
      { message: "gateway refusing new connections" },
    );
    expect(gateway.proc.exitCode).toBeNull();

    release();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ done: true, requestId: "drain-test-1" });
    // It exits by itself once drained (a second signal would mean "exit now").
    await waitFor(() => gateway!.proc.exitCode !== null, { message: "gateway exit" });
    expect(gateway.proc.exitCode).toBe(0);

    // Its log is JSON lines; the request's access line carries the request id.
    const lines = gateway
      .output()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines.find((l) => l.message === "request" && l.requestId === "drain-test-1")).toMatchObject({
      level: "info",
      method: "GET",
      path: "/api/ops-test/slow",
      status: 200,
      svc: "api-gateway",
    });
    expect(lines.some((l) => /SIGTERM received: draining/.test(l.message))).toBe(true);
  });
});
