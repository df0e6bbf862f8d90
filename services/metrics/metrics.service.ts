/**
 * Collects the platform's own figures into Prometheus metrics (lib/metrics.ts) of the process it
 * runs in: GPU telemetry per card from gpu-node heartbeats, inference tokens/latency per model from
 * `inference.completed`, and queue/jobs/databases and usage totals per resource from the
 * `gpu-scheduler.stats`, `dbaas.stats` and `usage.stats` actions every METRICS_COLLECT_INTERVAL_S.
 * A service that is not running simply leaves its metrics unset. Run one replica: counters from
 * events are counted where they arrive.
 * It also keeps each card's utilisation and memory over the last hour for the console's cluster
 * chart (history.ts, GET /api/gpu/status/history), whether or not the Prometheus endpoint is on.
 */
import type { Context, Service, ServiceBroker, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { brokerEnv } from "../../lib/settings";
import { MetricsSettings, parseMetricsSettings } from "./settings";
import { checkHeartbeat, HEARTBEAT_EVENT } from "../../lib/gpu-protocol";
import { clearMetric, incrementCounter, metricsEnabled, observe, registerPlatformMetrics, setGauge } from "../../lib/metrics";
import { RefusalLog } from "../../lib/refusal-log";
import { DBAAS_STATS_ACTION } from "../dbaas/stats";
import { SCHEDULER_STATS_ACTION, STATS_JOB_STATUSES } from "../gpu-scheduler/stats";
import { USAGE_STATS_ACTION } from "../usage/stats";
import { INFERENCE_COMPLETED } from "../../lib/event-names";
import { isInferenceCompleted } from "../inference/events";
import { dbaasStatsOf, GpuTelemetry, inferenceLabels, schedulerStatsOf, usageStatsOf } from "./telemetry";
import { GpuHistory, MAX_CARDS } from "./history";
import { GpuStatusHistory } from "./contract";

type MetricsThis = Service & {
  config: MetricsSettings;
  telemetry: GpuTelemetry;
  history: GpuHistory;
  refusals: RefusalLog;
  timer?: NodeJS.Timeout;
  enabled: boolean;
  publishGpus(): void;
  collect(): Promise<void>;
  collectOnce(): Promise<void>;
  collecting: boolean;
  ask(action: string): Promise<unknown | undefined>;
};

function setCounts(
  broker: ServiceBroker,
  which: "gpuJobs" | "databases" | "databaseStorage" | "databaseWalArchive" | "gpuNodeCardsPending" | "gpuNodeCardsDisallowed",
  label: string,
  counts: Record<string, number>,
  always: readonly string[] = [],
) {
  clearMetric(broker, which); // a state that disappeared must not keep its last value
  for (const key of always) setGauge(broker, which, counts[key] ?? 0, { [label]: key });
  for (const [key, value] of Object.entries(counts)) if (!always.includes(key)) setGauge(broker, which, value, { [label]: key });
}

const MetricsService: ServiceSchema<ServiceSettingSchema, MetricsThis> = {
  name: "metrics",

  settings: {
    // Beyond the contract (docs/jobs.md): a base of its own under gpu-scheduler's /gpu, so that while this
    // service is down the gateway answers 503 for it alone (lib/service-routes.ts: the longest base owns a path).
    rest: "/gpu/status/history",
  },

  actions: {
    gpuHistory: {
      rest: "GET /",
      auth: "required",
      scope: "jobs:read", // as GET /api/gpu/status
      openapi: {
        tag: "gpu",
        summary: "Each card's utilization and memory over the last hour",
        description:
          "One sample per card per `bucketSeconds` (the mean of its node's heartbeats in that bucket), over the last `windowSeconds`, oldest first. " +
          "Kept in memory by the metrics service from the moment it starts (a restart begins anew); a card not heard from for a whole window is left out. " +
          "503 SERVICE_UNAVAILABLE while the metrics service is not running.",
        status: 200,
        response: GpuStatusHistory,
      },
      handler(this: MetricsThis): GpuStatusHistory {
        const { bucketMs, windowMs } = this.history;
        return { bucketSeconds: bucketMs / 1000, windowSeconds: windowMs / 1000, gpus: this.history.snapshot(Date.now()) };
      },
    },
  },

  events: {
    // First figures as soon as a service appears, rather than at the next tick.
    "$services.changed"(this: MetricsThis) {
      if (this.timer) return this.collect();
    },

    [HEARTBEAT_EVENT](this: MetricsThis, ctx: Context<unknown>) {
      const checked = checkHeartbeat(ctx.params);
      if (!checked.ok) return void this.refusals.refused("gpu-node heartbeat", ctx.nodeID ?? "this process", checked.field);
      const hb = checked.value;
      // ctx.nodeID is the sender the transporter verified: a node reports only its own cards.
      if (hb.nodeId !== ctx.nodeID) return void this.logger.warn(`Ignoring a heartbeat for ${hb.nodeId} sent by ${ctx.nodeID}`);
      const now = Date.now();
      this.history.record(hb.cards, now);
      if (!this.enabled) return;
      this.telemetry.record(hb, now);
      this.publishGpus();
    },

    [INFERENCE_COMPLETED](this: MetricsThis, ctx: Context<unknown>) {
      if (!this.enabled) return;
      const e = ctx.params;
      if (!isInferenceCompleted(e)) {
        this.logger.warn("Ignoring a malformed inference.completed event");
        return;
      }
      const labels = inferenceLabels(e);
      incrementCounter(this.broker, "inferenceRequests", { ...labels, outcome: e.outcome });
      if (e.tokensUsed) incrementCounter(this.broker, "inferenceTokens", labels, e.tokensUsed);
      observe(this.broker, "inferenceDuration", e.durationMs, labels);
    },
  },

  methods: {
    publishGpus(this: MetricsThis) {
      const cards = this.telemetry.current(Date.now());
      for (const which of ["gpuUtilization", "gpuMemoryUsed", "gpuMemoryTotal", "gpuTemperature"] as const) clearMetric(this.broker, which);
      for (const card of cards) {
        const labels = { node: card.nodeId, gpu: card.uuid, index: card.index, card: card.name };
        setGauge(this.broker, "gpuUtilization", card.utilization, labels);
        setGauge(this.broker, "gpuMemoryUsed", card.memoryUsed, labels);
        setGauge(this.broker, "gpuMemoryTotal", card.memoryTotal, labels);
        setGauge(this.broker, "gpuTemperature", card.temperature, labels);
      }
    },

    /** The action's answer, or undefined when its service is not running or failed. */
    async ask(this: MetricsThis, action: string) {
      if (!this.broker.registry.actions.isAvailable(action)) return undefined;
      try {
        return await this.broker.call(action, {}, { timeout: 5000 });
      } catch (err) {
        this.logger.warn(`Metrics: ${action} failed: ${(err as Error).message}`);
        return undefined;
      }
    },

    async collect(this: MetricsThis) {
      if (this.collecting) return;
      this.collecting = true;
      try {
        await this.collectOnce();
      } catch (err) {
        this.logger.warn(`Metrics collection failed: ${(err as Error).message}`);
      } finally {
        this.collecting = false;
      }
    },

    async collectOnce(this: MetricsThis) {
      const [scheduler, dbaas, usage] = await Promise.all([this.ask(SCHEDULER_STATS_ACTION), this.ask(DBAAS_STATS_ACTION), this.ask(USAGE_STATS_ACTION)]);
      if (scheduler !== undefined) {
        const stats = schedulerStatsOf(scheduler);
        if (stats.queueDepth !== null) setGauge(this.broker, "gpuQueueDepth", stats.queueDepth);
        setCounts(this.broker, "gpuJobs", "status", stats.jobsByStatus, STATS_JOB_STATUSES);
        setCounts(this.broker, "gpuNodeCardsPending", "node", stats.pendingCards);
        setCounts(this.broker, "gpuNodeCardsDisallowed", "node", stats.disallowedCards);
      }
      if (dbaas !== undefined) {
        const stats = dbaasStatsOf(dbaas);
        setCounts(this.broker, "databases", "state", stats.databasesByState);
        setCounts(this.broker, "databaseStorage", "state", stats.storageMbByState);
        setCounts(this.broker, "databaseWalArchive", "figure", stats.walArchive);
      }
      if (usage !== undefined) {
        const stats = usageStatsOf(usage);
        for (const [which, value] of [
          ["usageGpuSeconds", stats.gpuSeconds],
          ["usageTokens", stats.tokens],
          ["usageStorageMbHours", stats.storageMbHours],
          ["usageCredits", stats.credits],
        ] as const)
          if (value !== null) setGauge(this.broker, which, value); // the ledger's running total: set, not added to
      }
      this.publishGpus(); // drops cards of nodes gone silent
    },
  },

  created(this: MetricsThis) {
    this.config = parseMetricsSettings(brokerEnv(this.broker));
    this.telemetry = new GpuTelemetry();
    const { historyBucketS, historyWindowS } = this.config;
    this.history = new GpuHistory({ bucketMs: historyBucketS * 1000, windowMs: historyWindowS * 1000, maxCards: MAX_CARDS });
    this.refusals = new RefusalLog((line) => this.logger.warn(line));
    this.enabled = metricsEnabled(this.broker);
  },

  started(this: MetricsThis) {
    if (!this.enabled) return;
    registerPlatformMetrics(this.broker);
    this.timer = setInterval(() => void this.collect(), this.config.collectIntervalS * 1000);
    this.timer.unref();
    return this.collect();
  },

  stopped(this: MetricsThis) {
    clearInterval(this.timer);
    this.timer = undefined;
  },
};

export default MetricsService;
