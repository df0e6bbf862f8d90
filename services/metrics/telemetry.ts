/**
 * What the metrics service keeps between scrapes: the last heartbeat of every gpu-node (a node
 * silent for STALE_AFTER_MS drops out, so a removed host stops being reported), and checks on the
 * shapes other services send, since an event handler must never throw on a bad payload.
 */
import { GpuCard, isGpuCard, NodeHeartbeat } from "../../lib/gpu-protocol";

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
const isString = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);


export function isHeartbeat(v: unknown): v is NodeHeartbeat {
  return isObject(v) && isString(v.nodeId) && Array.isArray(v.cards) && v.cards.every(isGpuCard);
}

/** `inference.completed`, as the inference service emits it (no provider: the model was not found). */
export type InferenceCompleted = { model: string; provider: string | null; tokensUsed: number | null; durationMs: number; outcome: string };

export function isInferenceCompleted(v: unknown): v is InferenceCompleted {
  return (
    isObject(v) &&
    isString(v.model) &&
    (v.provider === null || isString(v.provider)) &&
    isString(v.outcome) &&
    (v.tokensUsed === undefined || v.tokensUsed === null || isNumber(v.tokensUsed)) &&
    isNumber(v.durationMs)
  );
}

/** A `{ label: count }` map with numeric values only (stats answers of other services). */
/**
 * Metric labels of an inference: a model no provider knows is whatever the client typed, so it
 * is reported as one "(unknown)" series instead of one series per typo.
 */
export function inferenceLabels(e: InferenceCompleted): { model: string; provider: string } {
  return e.provider ? { model: e.model, provider: e.provider } : { model: "(unknown)", provider: "none" };
}

export function countsOf(v: unknown): Record<string, number> {
  if (!isObject(v)) return {};
  return Object.fromEntries(Object.entries(v).filter((e): e is [string, number] => isNumber(e[1])));
}

export type SchedulerStats = { queueDepth: number | null; jobsByStatus: Record<string, number> };
export type DbaasStats = { databasesByState: Record<string, number>; storageMbByState: Record<string, number> };

export function schedulerStatsOf(v: unknown): SchedulerStats {
  const o = isObject(v) ? v : {};
  return { queueDepth: isNumber(o.queueDepth) ? o.queueDepth : null, jobsByStatus: countsOf(o.jobsByStatus) };
}

export function dbaasStatsOf(v: unknown): DbaasStats {
  const o = isObject(v) ? v : {};
  return { databasesByState: countsOf(o.databasesByState), storageMbByState: countsOf(o.storageMbByState) };
}
