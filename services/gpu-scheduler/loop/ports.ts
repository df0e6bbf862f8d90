/** The scheduler's narrow seams to the world outside the database: gpu-nodes and the clock. */
import type { RunJobParams } from "../../../lib/job-spec";

/** The calls the scheduler makes on one gpu-node (services/gpu-node), by its broker node id. */
export interface NodeClient {
  run(nodeId: string, params: RunJobParams): Promise<void>;
  /** `preempt`: stopped for a waiting job (the node's GPU_PREEMPT_GRACE_S between SIGTERM and SIGKILL). */
  cancel(nodeId: string, jobId: string, preempt?: boolean): Promise<{ stopped: boolean }>;
}

export type Clock = { now(): Date };

/** The scheduler core's waits and time limits (from the service's SchedulerSettings, settings.ts). */
export type SchedulerTimings = {
  nodeTimeoutMs: number;
  dispatchTimeoutMs: number;
  /** Until this long after start, not every live node has announced itself yet. */
  warmUpMs: number;
  /** The least time between two reconciliations of one node's heartbeats (a flooding node's are coalesced meanwhile); absent: 0. */
  reconcileIntervalMs?: number;
  /** RETRY_BACKOFF_S: the wait before a failed job's first retry (doubling for each later one); absent: 5. */
  retryBackoffS?: number;
};
