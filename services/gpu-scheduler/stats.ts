/**
 * `gpu-scheduler.stats`: the scheduler's figures for the metrics service (services/metrics). The
 * scheduler answers it; a reader takes the shape from here.
 */
import type { NodeEntry } from "./core/cluster-view";

export const SCHEDULER_STATS_ACTION = "gpu-scheduler.stats";

/** The job states the figures count (an assigned job is still counted as queued). */
export const STATS_JOB_STATUSES = ["queued", "running", "completed", "failed", "cancelled"] as const;

export type SchedulerStats = {
  queueDepth: number;
  jobsByStatus: Record<(typeof STATS_JOB_STATUSES)[number], number>;
  /** Per node heard now: cards announced that wait for an administrator's acceptance (node-cards.ts). */
  pendingCards: Record<string, number>;
  /** Per node heard now: accepted cards beyond GPU_NODE_CARDS. */
  disallowedCards: Record<string, number>;
};

/** The held-back cards of each node, by reason (every node heard counts, 0 included, so a cleared node reads 0). */
export function heldCardCounts(nodes: ReadonlyArray<Pick<NodeEntry, "nodeId" | "held">>): Pick<SchedulerStats, "pendingCards" | "disallowedCards"> {
  const pendingCards: Record<string, number> = {};
  const disallowedCards: Record<string, number> = {};
  for (const node of nodes) {
    pendingCards[node.nodeId] = node.held.filter((c) => c.reason === "pending").length;
    disallowedCards[node.nodeId] = node.held.filter((c) => c.reason === "not-allowed").length;
  }
  return { pendingCards, disallowedCards };
}
