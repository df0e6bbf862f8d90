/**
 * Builds a broker with the services this process runs (SERVICES, default all). Used by index.ts,
 * the tests and the benchmarks, so every mode starts the same way.
 */
import { BrokerOptions, ServiceBroker, ServiceSchema } from "moleculer";
import { brokerConfig } from "../moleculer.config";
import { config } from "./config";

type Loader = () => ServiceSchema;

/** Every service of the platform, by the name SERVICES uses. */
export const SERVICE_REGISTRY: Record<string, Loader> = {
  "api-gateway": () => require("../services/api-gateway/api-gateway.service").default,
  auth: () => require("../services/auth/auth.service").default,
  dbaas: () => require("../services/dbaas/dbaas.service").default,
  "gpu-node": () => require("../services/gpu-node/gpu-node.service").default,
  "gpu-scheduler": () => require("../services/gpu-scheduler/gpu-scheduler.service").default,
  inference: () => require("../services/inference/inference.service").default,
  metrics: () => require("../services/metrics/metrics.service").default,
};

export function resolveServices(names: string[]): ServiceSchema[] {
  const wanted = names.length ? names : Object.keys(SERVICE_REGISTRY);
  return wanted.map((name) => {
    const load = SERVICE_REGISTRY[name];
    if (!load) throw new Error(`Unknown service "${name}" in SERVICES (known: ${Object.keys(SERVICE_REGISTRY).join(", ")})`);
    return load();
  });
}

export function createBroker(services: string[] = config.services(), overrides: Partial<BrokerOptions> = {}): ServiceBroker {
  const broker = new ServiceBroker({ ...brokerConfig(services), ...overrides });
  for (const schema of resolveServices(services)) broker.createService(schema);
  return broker;
}
