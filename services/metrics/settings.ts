/** The metrics service's settings (README "Configuration"), parsed when it is created. */
import { Env, intAtLeast, positive, SettingError } from "../../lib/settings";

/** Samples one card's history may hold (window / bucket): two hours at the default 10 s. */
export const MAX_HISTORY_SAMPLES = 720;

export type MetricsSettings = {
  /** How often the metrics service asks the other services for their figures. */
  collectIntervalS: number;
  /** The cluster history (history.ts): one sample per card per bucket of this many seconds… */
  historyBucketS: number;
  /** …over the last this many seconds. */
  historyWindowS: number;
};

export function parseMetricsSettings(env: Env): MetricsSettings {
  const historyBucketS = intAtLeast(env, "METRICS_HISTORY_BUCKET_S", 10, 1);
  const historyWindowS = intAtLeast(env, "METRICS_HISTORY_WINDOW_S", 3600, historyBucketS);
  if (historyWindowS / historyBucketS > MAX_HISTORY_SAMPLES)
    throw new SettingError("METRICS_HISTORY_WINDOW_S", String(historyWindowS), `at most ${MAX_HISTORY_SAMPLES} × METRICS_HISTORY_BUCKET_S`);
  return { collectIntervalS: positive(env, "METRICS_COLLECT_INTERVAL_S", 15), historyBucketS, historyWindowS };
}
