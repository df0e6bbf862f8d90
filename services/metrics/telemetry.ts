/**
 * What the metrics service keeps between scrapes: the last heartbeat of every gpu-node (a node
 * silent for STALE_AFTER_MS drops out, so a removed host stops being reported), and a lenient
 * reading of the figures other services answer (their shapes live with them: gpu-scheduler/stats.ts, dbaas/stats.ts, usage/stats.ts).
 */
import type { GpuCard, NodeHeartbeat } from "../../lib/gpu-protocol";
import type { DatabaseStats } from "../dbaas/stats";
import type { SchedulerStats } from "../gpu-scheduler/stats";
import type { UsageStats } from "../usage/stats";
import type { InferenceCompleted } from "../inference/events";

/** Several missed heartbeats (sent every few seconds) before a node's cards stop being reported. */
export const STALE_AFTER_MS = 30_000;

export type CardSample = GpuCard & { nodeId: string };

export class GpuTelemetry {
  private nodes = new Map<string, { cards: GpuCard[]; seenAt: number }>();

  record(heartbeat: NodeHeartbeat, now: number): void {
    this.nodes.set(heartbeat.nodeId, { cards: heartbeat.cards, seenAt: now });
  }

  /** Cards of the nodes heard from within STALE_AFTER_MS; forgets the others. */
  current(now: number): CardSample[] {
    const cards: CardSample[] = [];
    for (const [nodeId, node] of this.nodes) {
      if (now - node.seenAt > STALE_AFTER_MS) this.nodes.delete(nodeId);
      else for (const card of node.cards) cards.push({ ...card, nodeId });
    }
    return cards;
  }
}

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Metric labels of an inference: a model no provider knows is whatever the client typed, so it
 * is reported as one "(unknown)" series instead of one series per typo.
 */
export function inferenceLabels(e: InferenceCompleted): { model: string; provider: string } {
  return e.provider ? { model: e.model, provider: e.provider } : { model: "(unknown)", provider: "none" };
}

/** A `{ label: count }` map with numeric values only (stats answers of other services). */
export function countsOf(v: unknown): Record<string, number> {
  if (!isObject(v)) return {};
  return Object.fromEntries(Object.entries(v).filter((e): e is [string, number] => isNumber(e[1])));
}

/**
 * A stats answer as read from another process: a figure that is missing or not a number is null,
 * a count map keeps its numeric entries only (labels it does not know included).
 */
export type StatsReading<T> = { [K in keyof T]-?: T[K] extends number ? number | null : Record<string, number> };

export function schedulerStatsOf(v: unknown): StatsReading<SchedulerStats> {
  const o = isObject(v) ? v : {};
  return {
    queueDepth: isNumber(o.queueDepth) ? o.queueDepth : null,
    jobsByStatus: countsOf(o.jobsByStatus),
    pendingCards: countsOf(o.pendingCards),
    disallowedCards: countsOf(o.disallowedCards),
  };
}

export function dbaasStatsOf(v: unknown): StatsReading<DatabaseStats> {
  const o = isObject(v) ? v : {};
  return { databasesByState: countsOf(o.databasesByState), storageMbByState: countsOf(o.storageMbByState), walArchive: countsOf(o.walArchive) };
}

export function usageStatsOf(v: unknown): StatsReading<UsageStats> {
  const o = isObject(v) ? v : {};
  const figure = (k: keyof UsageStats) => (isNumber(o[k]) ? o[k] : null);
  return { gpuSeconds: figure("gpuSeconds"), tokens: figure("tokens"), storageMbHours: figure("storageMbHours"), credits: figure("credits") };
}
