/**
 * Broker options shared by every process. TRANSPORTER picks the bus: unset, all services run in
 * one process on the in-process bus; `nats://host:4222`, each service can run in its own process.
 */
import type { BrokerOptions } from "moleculer";
import { config } from "./lib/config";
import { createChannelsMiddleware } from "./lib/channels";
import { AuthMiddleware } from "./middlewares/auth.middleware";
import { HealthMiddleware } from "./lib/health";
import { jsonLineFormatter, RequestScopeMiddleware } from "./lib/logging";
import { metricsOptions } from "./lib/metrics";
import { transporterOption } from "./lib/nats-transporter";

export function brokerConfig(): BrokerOptions {
  return {
    namespace: config.namespace(),
    nodeID: process.env.NODE_ID || undefined,
    // NATS packets sent in one event-loop turn share one socket write (lib/nats-transporter.ts).
    transporter: transporterOption(config.transporter()),
    logger: {
      type: "Console",
      options: {
        level: config.logLevel(),
        // JSON lines carry the request id of the action being served (lib/logging.ts).
        formatter: config.logFormat() === "json" ? jsonLineFormatter : (config.logFormat() as "short"),
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
    middlewares: [
      // The request scope only feeds JSON lines' requestId; other formats skip its async-hooks cost.
      ...(config.logFormat() === "json" ? [RequestScopeMiddleware] : []),
      AuthMiddleware,
      createChannelsMiddleware(),
      HealthMiddleware(),
    ],
    metrics: metricsOptions(),
    // Stopping waits for running actions (in-flight HTTP requests included); index.ts handles signals.
    tracking: { enabled: true, shutdownTimeout: config.shutdownTimeoutS() * 1000 },
    skipProcessEventRegistration: true,
    tracing: { enabled: false },
  };
}

export default brokerConfig();
