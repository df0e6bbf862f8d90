/** The platform's NATS transporter (lib/nats-transporter.ts) between two brokers on a real NATS server. */
import { Context, ServiceBroker } from "moleculer";
import { connect } from "nats";
import { natsConnectionOptions } from "../../lib/bus-connection";
import { BusTransporter } from "../../lib/nats-transporter";
import { NATS_URL, uniqueName, waitFor } from "../support/platform";

describe("platform - batching NATS transporter", () => {
  const namespace = uniqueName("natsbatch");
  const received: number[] = [];
  const make = (nodeID: string) =>
    new ServiceBroker({ namespace, nodeID, transporter: new BusTransporter(natsConnectionOptions(NATS_URL)), logger: false, heartbeatTimeout: 15 });
  const caller = make(uniqueName("caller"));
  const callee = make(uniqueName("callee"));

  beforeAll(async () => {
    callee.createService({
      name: "echo",
      actions: {
        twice: { handler: (ctx: Context<{ n: number }>) => ctx.params.n * 2 },
        big: { handler: (ctx: Context<{ bytes: number }>) => "x".repeat(ctx.params.bytes) },
      },
      events: { "seq.tick": { handler: (ctx: Context<{ n: number }>) => void received.push(ctx.params.n) } },
    });
    await Promise.all([caller.start(), callee.start()]);
    await caller.waitForServices("echo", 10_000);
  });

  afterAll(async () => {
    await Promise.all([caller.stop(), callee.stop()]);
  });

  test("platform - requests sent in one turn all get their own answer", async () => {
    const answers = await Promise.all(Array.from({ length: 50 }, (_, n) => caller.call("echo.twice", { n })));
    expect(answers).toEqual(Array.from({ length: 50 }, (_, n) => n * 2));
  });

  test("platform - packets keep their order", async () => {
    for (let n = 0; n < 100; n++) await caller.emit("seq.tick", { n });
    await waitFor(() => received.length === 100, { message: "100 events" });
    expect(received).toEqual(Array.from({ length: 100 }, (_, n) => n));
  });

  test("platform - a request over the server's max_payload is a clean 413 and the caller stays up", async () => {
    const limit = (caller.transit as any).tx.client.info.max_payload as number;
    await expect(caller.call("echo.twice", { n: 1, pad: "y".repeat(limit + 10) })).rejects.toMatchObject({ code: 413, type: "PAYLOAD_TOO_LARGE" });
    expect(await caller.call("echo.twice", { n: 4 })).toBe(8);
  });

  test("platform - an answer over max_payload reaches the caller as an error at once, not a timeout", async () => {
    const limit = (callee.transit as any).tx.client.info.max_payload as number;
    const started = Date.now();
    await expect(caller.call("echo.big", { bytes: limit + 10 }, { timeout: 10_000 })).rejects.toMatchObject({ code: 413, type: "PAYLOAD_TOO_LARGE" });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await caller.call("echo.twice", { n: 5 })).toBe(10);
  });

  test("platform - an INFO packet forged with a node's own id, and garbage, stop nothing", async () => {
    const nc = await connect({ servers: new URL(NATS_URL).host });
    const subject = `MOL-${namespace}.INFO`;
    // Addressed to the callee only (on an open bus anyone may tell others anything; the authenticated bus binds senders).
    nc.publish(`${subject}.${callee.nodeID}`, Buffer.from(JSON.stringify({ ver: "4", sender: callee.nodeID, instanceID: "forged", services: [] })));
    nc.publish(subject, Buffer.from("{not json"));
    nc.publish(`MOL-${namespace}.HEARTBEAT`, Buffer.from(JSON.stringify({ ver: "4", sender: 42 })));
    await nc.flush();
    await nc.close();
    // Moleculer would have stopped the callee ("nodeID conflict"); it still answers.
    for (let n = 0; n < 3; n++) expect(await caller.call("echo.twice", { n })).toBe(n * 2);
  });

  test("platform - a stopping node's goodbye is sent before it disconnects", async () => {
    const started = Date.now();
    await callee.stop();
    // Without the DISCONNECT packet the caller would only notice after the 15 s heartbeat timeout.
    await waitFor(() => !caller.registry.nodes.get(callee.nodeID)?.available, { timeoutMs: 5_000, message: "the callee to leave" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
