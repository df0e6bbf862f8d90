/** Process entry point: runs the services named in SERVICES (all by default). */
import type { ServiceBroker } from "moleculer";
import { createBroker } from "./moleculer.config";
import { parsePlatformSettings } from "./lib/platform-settings";
import { portProblem } from "./lib/port-check";
import { int } from "./lib/settings";
import { installGracefulShutdown } from "./lib/shutdown";

function failed(err: unknown): never {
  console.error("Failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
}

/** The ports this process will listen on, checked before anything starts (lib/port-check.ts). */
async function checkPorts(): Promise<void> {
  const settings = parsePlatformSettings(process.env);
  const gateway = settings.services.length === 0 || settings.services.includes("api-gateway");
  const claims = [
    ...(gateway ? [{ variable: "PORT", port: int(process.env, "PORT", 3000) }] : []),
    { variable: "HEALTH_PORT", port: settings.healthPort },
    { variable: "METRICS_PORT", port: settings.metricsPort },
  ];
  const problem = await portProblem(claims, settings.listenHost);
  if (problem) failed(problem);
}

async function main(): Promise<void> {
  await checkPorts();
  let broker: ServiceBroker;
  try {
    // Settings are parsed here, each service's as it is created: a bad value stops the process now.
    broker = createBroker();
  } catch (err) {
    failed(err);
  }
  // SIGTERM drains (see lib/shutdown.ts); installed before start so a slow start can be stopped too.
  installGracefulShutdown(broker);
  await broker.start();
}

main().catch(failed);
