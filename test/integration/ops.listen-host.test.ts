/**
 * HOST binds the health and metrics servers as well as the gateway: a process on a host network
 * (the compose test's override) listens on loopback only; unset, every interface, as before.
 */
import { healthAddress } from "../../lib/health";
import { newBroker } from "../../moleculer.config";
import { freePort, testEnv, waitFor } from "../support/platform";

type Case = { name: string; host: string | undefined; bound: string[] };

const metricsAddress = (broker: ReturnType<typeof newBroker>) =>
  (broker.metrics as unknown as { reporter: Array<{ server?: { address(): { address: string } } }> }).reporter.find((r) => r.server)?.server?.address();

describe("ops - HOST binds the health and metrics servers", () => {
  it.each<Case>([
    { name: "HOST=127.0.0.1: loopback only", host: "127.0.0.1", bound: ["127.0.0.1"] },
    { name: "HOST unset: every interface", host: undefined, bound: ["::", "0.0.0.0"] },
  ])("ops - $name", async ({ host, bound }) => {
    // A fixed metrics port: Moleculer's Prometheus reporter ignores the host with port 0.
    const broker = newBroker([], {}, testEnv({ HOST: host, METRICS_PORT: String(await freePort()), LOG_LEVEL: "fatal" }));
    await broker.start();
    try {
      // listen() with an address binds a moment after start: wait until both servers are bound.
      const addresses = await waitFor(
        () => {
          const both = [healthAddress(broker)?.address, metricsAddress(broker)?.address];
          return both.every(Boolean) && both;
        },
        { timeoutMs: 5_000, message: "health and metrics servers bound" },
      );
      expect(addresses).toEqual([expect.any(String), expect.any(String)]);
      for (const address of addresses as string[]) expect(bound).toContain(address);
    } finally {
      await broker.stop();
    }
  });
});
