/** The batching NATS transporter (lib/nats-transporter.ts) between two brokers on a real NATS server. */
import { Context, ServiceBroker } from "moleculer";
import { transporterOption } from "../../lib/nats-transporter";
import { NATS_URL, uniqueName, waitFor } from "../support/platform";

describe("platform - batching NATS transporter", () => {
  const namespace = uniqueName("natsbatch");
  const received: number[] = [];
  const make = (nodeID: string) =>
    new ServiceBroker({ namespace, nodeID, transporter: transporterOption(NATS_URL), logger: false, heartbeatTimeout: 15 });
  const caller = make(uniqueName("caller"));
  const callee = make(uniqueName("callee"));

  beforeAll(async () => {
    callee.createService({
      name: "echo",
      actions: { twice: { handler: (ctx: Context<{ n: number }>) => ctx.params.n * 2 } },
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

  test("platform - a stopping node's goodbye is sent before it disconnects", async () => {
    const started = Date.now();
    await callee.stop();
    // Without the DISCONNECT packet the caller would only notice after the 15 s heartbeat timeout.
    await waitFor(() => !caller.registry.nodes.get(callee.nodeID)?.available, { timeoutMs: 5_000, message: "the callee to leave" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
