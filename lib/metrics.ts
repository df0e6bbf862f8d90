/**
 * Metrics: Moleculer's own (requests, events, process) plus the platform's, served by every
 * process in Prometheus text format on METRICS_PORT at /metrics. Names below use dots; the
 * Prometheus reporter writes them with underscores (`platform.gpu.queue.depth` →
 * `platform_gpu_queue_depth`). Every helper is a no-op when metrics are off.
 */
import type { BrokerOptions, ServiceBroker } from "moleculer";
import type { PlatformSettings } from "./platform-settings";

type Labels = Record<string, string | number>;
type MetricDef = {
  name: string;
  type: "gauge" | "counter" | "histogram";
  description: string;
  labelNames?: string[];
  unit?: string;
  buckets?: number[];
  quantiles?: boolean;
};

const CARD_LABELS = ["node", "gpu", "index", "card"];

export const PLATFORM_METRICS = {
  gpuQueueDepth: { name: "platform.gpu.queue.depth", type: "gauge", description: "GPU jobs waiting for a card" },
  gpuJobs: { name: "platform.gpu.jobs", type: "gauge", description: "GPU jobs by status", labelNames: ["status"] },
  gpuNodeCardsPending: {
    name: "platform.gpu.node.cards.pending",
    type: "gauge",
    description: "Cards a gpu-node announces that differ from those it registered: no job goes there until an administrator accepts them",
    labelNames: ["node"],
  },
  gpuNodeCardsDisallowed: {
    name: "platform.gpu.node.cards.disallowed",
    type: "gauge",
    description: "Cards of a gpu-node beyond its GPU_NODE_CARDS allowance, or repeating a uuid it announced already: no job goes there",
    labelNames: ["node"],
  },
  gpuUtilization: { name: "platform.gpu.utilization.percent", type: "gauge", description: "GPU utilization per card (%)", labelNames: CARD_LABELS },
  gpuMemoryUsed: { name: "platform.gpu.memory.used.mib", type: "gauge", description: "GPU memory used per card (MiB)", labelNames: CARD_LABELS },
  gpuMemoryTotal: { name: "platform.gpu.memory.total.mib", type: "gauge", description: "GPU memory per card (MiB)", labelNames: CARD_LABELS },
  gpuTemperature: { name: "platform.gpu.temperature.celsius", type: "gauge", description: "GPU temperature per card (°C)", labelNames: CARD_LABELS },
  inferenceRequests: {
    name: "platform.inference.requests.total",
    type: "counter",
    description: "Inference requests by model, provider and outcome",
    labelNames: ["model", "provider", "outcome"],
  },
  inferenceTokens: {
    name: "platform.inference.tokens.total",
    type: "counter",
    description: "Tokens used (prompt + generated) by model",
    labelNames: ["model", "provider"],
  },
  inferenceDuration: {
    name: "platform.inference.duration.ms",
    type: "histogram",
    description: "Inference request duration by model (ms)",
    labelNames: ["model", "provider"],
    unit: "millisecond",
    buckets: [50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000],
    quantiles: true,
  },
  busDropped: {
    name: "platform.bus.dropped.total",
    type: "counter",
    description: "Bus packets dropped unread: their sender (a gpu-node) went over its per-second budget",
    labelNames: ["sender", "kind"],
  },
  databases: { name: "platform.databases", type: "gauge", description: "Client databases by state", labelNames: ["state"] },
  databaseStorage: {
    name: "platform.databases.storage.mb",
    type: "gauge",
    description: "Storage of client databases by state (MB)",
    labelNames: ["state"],
  },
  databaseWalArchive: {
    name: "platform.databases.wal.archive",
    type: "gauge",
    description: "The tenant server's WAL archiving for point-in-time restore: failing (1 while its latest attempt failed), failedTotal, secondsSinceArchived",
    labelNames: ["figure"],
  },
  // Usage totals of all accounts together (the usage ledger, all time): never an account label.
  usageGpuSeconds: { name: "platform.usage.gpu.seconds.total", type: "counter", description: "GPU-seconds (× cards) recorded in the usage ledger" },
  usageTokens: { name: "platform.usage.tokens.total", type: "counter", description: "Inference tokens recorded in the usage ledger" },
  usageStorageMbHours: {
    name: "platform.usage.storage.mb.hours.total",
    type: "counter",
    description: "Database storage MB-hours recorded in the usage ledger",
  },
  usageCredits: { name: "platform.usage.credits.total", type: "counter", description: "Credits of the recorded usage at the current prices" },
} satisfies Record<string, MetricDef>;

export type PlatformMetric = keyof typeof PLATFORM_METRICS;

/** Broker options: the Prometheus reporter on METRICS_PORT, or metrics off. */
export function metricsOptions(settings: Pick<PlatformSettings, "metricsPort" | "listenHost">): BrokerOptions["metrics"] {
  const port = settings.metricsPort;
  if (port === null) return { enabled: false };
  return {
    enabled: true,
    reporter: [{ type: "Prometheus", options: { port, host: settings.listenHost, path: "/metrics" } }],
  };
}

export const metricsEnabled = (broker: ServiceBroker): boolean => broker.isMetricsEnabled();

/** Registers the platform's metrics on this broker (idempotent). */
export function registerPlatformMetrics(broker: ServiceBroker): void {
  if (!metricsEnabled(broker)) return;
  for (const def of Object.values(PLATFORM_METRICS) as MetricDef[]) {
    if (!broker.metrics.hasMetric(def.name)) broker.metrics.register({ ...def } as never);
  }
}

type GenericMetric = {
  set(value: number, labels?: Labels): void;
  increment(labels?: Labels, value?: number): void;
  observe(value: number, labels?: Labels): void;
  clear(): void;
};

function metric(broker: ServiceBroker, which: PlatformMetric): GenericMetric | null {
  if (!metricsEnabled(broker)) return null;
  registerPlatformMetrics(broker);
  return broker.metrics.getMetric(PLATFORM_METRICS[which].name) as unknown as GenericMetric;
}

export function setGauge(broker: ServiceBroker, which: PlatformMetric, value: number, labels?: Labels): void {
  if (Number.isFinite(value)) metric(broker, which)?.set(value, labels);
}

export function incrementCounter(broker: ServiceBroker, which: PlatformMetric, labels?: Labels, value = 1): void {
  if (Number.isFinite(value)) metric(broker, which)?.increment(labels, value);
}

export function observe(broker: ServiceBroker, which: PlatformMetric, value: number, labels?: Labels): void {
  if (Number.isFinite(value)) metric(broker, which)?.observe(value, labels);
}

/** Drops every series of a metric (series whose labels no longer exist, e.g. a lost GPU node). */
export function clearMetric(broker: ServiceBroker, which: PlatformMetric): void {
  metric(broker, which)?.clear();
}

/** Where this broker's Prometheus endpoint listens (tests use METRICS_PORT=0). */
export function metricsPortOf(broker: ServiceBroker): number | undefined {
  const reporters = (broker.metrics as unknown as { reporter?: Array<{ server?: { address(): unknown } }> }).reporter;
  const address = reporters?.find((r) => r.server)?.server?.address();
  return address && typeof address === "object" ? (address as { port: number }).port : undefined;
}
