/** Process entry point: runs the services named in SERVICES (all by default). */
import type { ServiceBroker } from "moleculer";
import { createBroker } from "./moleculer.config";
import { installGracefulShutdown } from "./lib/shutdown";

function failed(err: unknown): never {
  console.error("Failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
}

let broker: ServiceBroker;
try {
  // Settings are parsed here, each service's as it is created: a bad value stops the process now.
  broker = createBroker();
} catch (err) {
  failed(err);
}
// SIGTERM drains (see lib/shutdown.ts); installed before start so a slow start can be stopped too.
installGracefulShutdown(broker);
broker.start().catch(failed);
