/** dbaas background loops: runs repeat, never overlap, and stop waits for the run in flight. */
import type { LoggerInstance } from "moleculer";
import { Periodic } from "../../services/dbaas/periodic";
import { waitFor } from "../support/platform";

const logger = { warn: jest.fn() } as unknown as LoggerInstance;

describe("dbaas periodic", () => {
  it("dbaas periodic - runs on its interval, one at a time, with runNow and exclusive work in between", async () => {
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    const task = async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise((r) => setImmediate(r));
      running--;
      return ++runs;
    };
    const loop = new Periodic("test", task, () => 0.005, logger);
    loop.start(0);
    const side = async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise((r) => setImmediate(r));
      running--;
      return "side";
    };
    const extra = await Promise.all([loop.runNow(), loop.runNow(), loop.exclusive(side)]);
    expect(extra[2]).toBe("side");
    await waitFor(() => runs >= 6, { message: "six runs" });
    await loop.stop();
    expect(running).toBe(0); // stop waited for the run in flight
    expect(maxRunning).toBe(1);
  });

  it("dbaas periodic - a failing run is logged and the loop goes on; runNow rejects with the error", async () => {
    let calls = 0;
    const loop = new Periodic(
      "flaky",
      async () => {
        calls++;
        throw new Error("server down");
      },
      () => 0.005,
      logger,
    );
    loop.start(0);
    await waitFor(() => calls >= 3, { message: "three attempts" });
    await expect(loop.runNow()).rejects.toThrow("server down");
    await loop.stop();
    expect(logger.warn).toHaveBeenCalledWith(expect.stringContaining("flaky failed: server down"));
  });
});
