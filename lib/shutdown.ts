/**
 * SIGTERM/SIGINT handling of a platform process: answer "not ready" at once, wait
 * SHUTDOWN_DELAY_S so load balancers stop sending, stop accepting HTTP connections, let in-flight
 * work finish (the broker's context tracking waits for running actions, the gateway's server for
 * open responses), then exit 0. Anything still running after SHUTDOWN_TIMEOUT_S exits 1.
 */
import type { Server } from "http";
import type { ServiceBroker } from "moleculer";
import { platformSettingsOf } from "./platform-settings";
import { markDraining } from "./health";

/** HTTP servers of this process's services (the gateway's): closed first so nothing new arrives. */
function httpServers(broker: ServiceBroker): Server[] {
  return broker.services
    .map((svc) => (svc as unknown as { server?: Server }).server)
    .filter((s): s is Server => !!s && typeof s.close === "function" && s.listening);
}

/** Stops accepting; resolves once every open request on `server` has been answered. */
function stopAccepting(server: Server): Promise<void> {
  return new Promise((resolve) => {
    // Keep-alive sockets turn idle after their last response; closing them lets close() resolve.
    const sweep = setInterval(() => server.closeIdleConnections(), 100);
    server.close(() => {
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}

export async function drainAndStop(broker: ServiceBroker, signal: string): Promise<void> {
  broker.logger.info(`${signal} received: draining (not ready from now on)`);
  markDraining(broker);
  const delayS = platformSettingsOf(broker).shutdownDelayS;
  if (delayS > 0) await new Promise((r) => setTimeout(r, delayS * 1000));
  const answered = Promise.all(httpServers(broker).map(stopAccepting));
  await broker.stop();
  await answered;
}

/** Installs the handlers once per process; `exit` is injectable for tests. */
export function installGracefulShutdown(broker: ServiceBroker, exit: (code: number) => void = process.exit): void {
  const timeoutS = platformSettingsOf(broker).shutdownTimeoutS;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      broker.logger.warn(`${signal} received again: exiting now`);
      exit(1);
      return;
    }
    stopping = true;
    const timer = setTimeout(
      () => {
        broker.logger.error(`Shutdown did not finish within ${timeoutS} s: exiting`);
        exit(1);
      },
      timeoutS * 1000 + 2000,
    );
    timer.unref();
    drainAndStop(broker, signal).then(
      () => exit(0),
      (err) => {
        broker.logger.error("Shutdown failed", err);
        exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}
