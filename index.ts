/** Process entry point: runs the services named in SERVICES (all by default). */
import { createBroker } from "./lib/runner";
import { installGracefulShutdown } from "./lib/shutdown";

const broker = createBroker();
// SIGTERM drains (see lib/shutdown.ts); installed before start so a slow start can be stopped too.
installGracefulShutdown(broker);
broker.start().catch((err) => {
  console.error("Failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
