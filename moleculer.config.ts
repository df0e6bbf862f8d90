/**
 * Broker options shared by every process. TRANSPORTER picks the bus: unset, all services run in
 * one process on the in-process bus; `nats://host:4222`, each service can run in its own process.
 */
import type { BrokerOptions } from "moleculer";
import { config } from "./lib/config";
import { createChannelsMiddleware } from "./lib/channels";
import { AuthMiddleware } from "./middlewares/auth.middleware";
import { InputMiddleware } from "./middlewares/input.middleware";
import { HealthMiddleware } from "./lib/health";
import { jsonLineFormatter, RequestScopeMiddleware } from "./lib/logging";
import { metricsOptions } from "./lib/metrics";
import { busSetup } from "./lib/bus-connection";
import { SERVICE_ROLES } from "./lib/bus-identity";
import { BusTransporter } from "./lib/nats-transporter";

/** `services`: what this process runs (default SERVICES, empty = all); it decides the bus role and node id. */
export function brokerConfig(services: readonly string[] = config.services()): BrokerOptions {
  const bus = busSetup(services, SERVICE_ROLES);
  const url = config.transporter();
  return {
    namespace: config.namespace(),
    // `<role>.<instance>`; on an authenticated bus the NATS user may publish only under it (lib/bus-subjects.ts).
    nodeID: bus.nodeID,
    // NATS: packets of one event-loop turn share one socket write; sender-bound subjects when authenticated.
    transporter: bus.connection ? new BusTransporter({ ...bus.connection, senderBound: bus.senderBound }) : url,
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
      // NUL bytes and unpaired surrogates in any string param: 400 before a handler or a batch sees them.
      InputMiddleware,
      createChannelsMiddleware(bus),
      HealthMiddleware(),
    ],
    metrics: metricsOptions(),
    // Stopping waits for running actions (in-flight HTTP requests included); index.ts handles signals.
    tracking: { enabled: true, shutdownTimeout: config.shutdownTimeoutS() * 1000 },
    skipProcessEventRegistration: true,
    tracing: { enabled: false },
  };
}


