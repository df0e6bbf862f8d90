/**
 * `usage.stats`: the platform's usage totals per resource, all accounts together, for the metrics
 * service (services/metrics). Never per account: an account label would make one Prometheus
 * series per client. The usage service answers it; a reader takes the shape from here.
 */
export const USAGE_STATS_ACTION = "usage.stats";

export type UsageStats = {
  /** GPU-seconds (× cards) of every job attempt recorded. */
  gpuSeconds: number;
  tokens: number;
  storageMbHours: number;
  /** The totals priced at the current CREDITS_PER_* settings. */
  credits: number;
};
