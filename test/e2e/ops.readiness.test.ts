/**
 * Readiness at start-up, with the real gateway and a local service whose `started` waits on a
 * promise the test controls: /ready is 503 naming it, /api/openapi.json is 503 (never a partial
 * document) and no `ready:` line is logged while it starts; then 200, the document lists its
 * routes, and one `ready: <services>` line is logged.
 */
import { Type } from "@sinclair/typebox";
import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../moleculer.config";
import { healthAddress } from "../../lib/health";
import { http, testEnv, uniqueName, waitFor } from "../support/platform";

describe("ops - readiness waits for every local service", () => {
  let broker: ServiceBroker | undefined;
  afterAll(() => broker?.stop());

  it("ops - /ready and /api/openapi.json are 503 while a local service is still starting, 200 (complete) after; one 'ready:' line is logged", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    broker = createBroker(["api-gateway"], { namespace: uniqueName("t"), nodeID: uniqueName("node") }, testEnv({ LOG_LEVEL: "info" }));
    broker.createService({
      name: "slowpoke",
      settings: { rest: "/slowpoke" },
      actions: {
        hello: {
          rest: "GET /",
          auth: "public",
          openapi: { tag: "reference", summary: "Hello", status: 200, response: Type.Object({ hello: Type.String() }) },
          handler: () => ({ hello: "world" }),
        },
      },
      async started() {
        await gate;
      },
    });
    const lines: string[] = [];
    const info = broker.logger.info.bind(broker.logger);
    broker.logger.info = (...args: unknown[]) => (lines.push(args.map(String).join(" ")), info(...args));
    const starting = broker.start();

    const gateway = broker.getLocalService("api-gateway") as unknown as { server?: { listening: boolean; address(): { port: number } } };
    await waitFor(() => gateway.server?.listening === true && healthAddress(broker!) !== undefined, { message: "the gateway and health server to listen" });
    const base = `http://127.0.0.1:${gateway.server!.address().port}`;
    const health = `http://127.0.0.1:${healthAddress(broker)!.port}`;

    const before = await http(health, "GET", "/ready");
    expect(before.status).toBe(503);
    expect(before.body.checks.services).toEqual({ ok: false, error: "starting: slowpoke" });
    const partial = await http(base, "GET", "/api/openapi.json");
    expect(partial.status).toBe(503);
    expect(partial.body.error).toMatchObject({ code: "SERVICE_UNAVAILABLE", message: expect.stringContaining("slowpoke"), details: null });
    expect(partial.headers.get("retry-after")).toBe("1");
    expect(lines.filter((l) => l.startsWith("ready:"))).toEqual([]);

    release();
    await starting;
    await waitFor(async () => (await http(health, "GET", "/ready")).status === 200, { message: "/ready to answer 200" });
    const after = await http(health, "GET", "/ready");
    expect(after.body.checks.services).toEqual({ ok: true });
    const doc = await http(base, "GET", "/api/openapi.json");
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(["/api/slowpoke", "/api/openapi.json"]));
    expect(lines.filter((l) => l.startsWith("ready:"))).toEqual(["ready: api-gateway, slowpoke"]);
  });
});
