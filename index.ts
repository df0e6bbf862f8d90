/** Process entry point: runs the services named in SERVICES (all by default). */
import { startBroker } from "./lib/runner";

startBroker().catch((err) => {
  console.error("Failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
