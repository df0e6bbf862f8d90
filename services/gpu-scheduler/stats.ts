/**
 * `gpu-scheduler.stats`: the scheduler's figures for the metrics service (services/metrics). The
 * scheduler answers it; a reader takes the shape from here.
 */
export const SCHEDULER_STATS_ACTION = "gpu-scheduler.stats";

/** The job states the figures count (an assigned job is still counted as queued). */
export const STATS_JOB_STATUSES = ["queued", "running", "completed", "failed", "cancelled"] as const;

export type SchedulerStats = {
  queueDepth: number;
  jobsByStatus: Record<(typeof STATS_JOB_STATUSES)[number], number>;
};
