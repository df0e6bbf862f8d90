/** The metrics service's settings (README "Configuration"), parsed when it is created. */
import { Env, positive } from "../../lib/settings";

export type MetricsSettings = {
  /** How often the metrics service asks the other services for their figures. */
  collectIntervalS: number;
};

export const parseMetricsSettings = (env: Env): MetricsSettings => ({
  collectIntervalS: positive(env, "METRICS_COLLECT_INTERVAL_S", 15),
});
