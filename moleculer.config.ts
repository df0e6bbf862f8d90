/**
 * Broker options shared by every process. TRANSPORTER picks the bus: unset, all services run in
 * one process on the in-process bus; `nats://host:4222`, each service can run in its own process.
 */
import type { BrokerOptions } from "moleculer";
import { config } from "./lib/config";
import { createChannelsMiddleware } from "./lib/channels";
import { AuthMiddleware } from "./middlewares/auth.middleware";

export function brokerConfig(): BrokerOptions {
  return {
    namespace: config.namespace(),
    nodeID: process.env.NODE_ID || undefined,
    transporter: config.transporter(),
    logger: {
      type: "Console",
      options: {
        level: config.logLevel(),
        formatter: config.logFormat() as "json" | "short",
        colors: config.logFormat() !== "json",
        moduleColors: false,
        autoPadding: false,
      },
    },
    serializer: "JSON",
    requestTimeout: 30_000,
    retryPolicy: { enabled: false },
    // Service discovery happens fast on a LAN; 5 s heartbeats keep the bus quiet.
    heartbeatInterval: 5,
    heartbeatTimeout: 15,
    registry: { strategy: "RoundRobin", preferLocal: true },
    circuitBreaker: { enabled: false },
    validator: true,
    errorHandler: undefined,
    middlewares: [AuthMiddleware, createChannelsMiddleware()],
    metrics: { enabled: false },
    tracing: { enabled: false },
  };
}

export default brokerConfig();
