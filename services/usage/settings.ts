/** The usage service's settings (README "Configuration" and "Usage, quotas and credits"), parsed when it is created. */
import { Env, int, optionalInt, perMinute, SettingError } from "../../lib/settings";
import type { QuotaDefaults, UsagePrices } from "../../lib/usage-protocol";
import { parsePrice } from "./pricing";

/** A monthly or standing limit: a number ≥ 0, or null for none. */
function optionalLimit(env: Env, name: string): number | null {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return null;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new SettingError(name, raw, "a number ≥ 0 (unset: no limit)");
  return value;
}

/** A factor between 0 and 1 (unset: `fallback`). */
function factor(env: Env, name: string, fallback: number): number {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new SettingError(name, raw, "a number from 0 to 1");
  return value;
}

export type UsageSettings = {
  prices: UsagePrices;
  defaults: QuotaDefaults;
};

export const parseUsageSettings = (env: Env): UsageSettings => ({
  prices: {
    gpuSecond: parsePrice("CREDITS_PER_GPU_SECOND", env.CREDITS_PER_GPU_SECOND),
    kTokens: parsePrice("CREDITS_PER_1K_TOKENS", env.CREDITS_PER_1K_TOKENS),
    gbHour: parsePrice("CREDITS_PER_GB_HOUR", env.CREDITS_PER_GB_HOUR),
    preemptibleFactor: factor(env, "PREEMPTIBLE_CREDIT_FACTOR", 0.5),
  },
  defaults: {
    credits: optionalLimit(env, "QUOTA_CREDITS_PER_MONTH"),
    gpuSeconds: optionalLimit(env, "QUOTA_GPU_SECONDS_PER_MONTH"),
    tokens: optionalLimit(env, "QUOTA_TOKENS_PER_MONTH"),
    // The same variables dbaas, gpu-scheduler and inference read: one default, whoever enforces it.
    databases: int(env, "DBAAS_MAX_PER_ACCOUNT", 5),
    storageMb: optionalLimit(env, "QUOTA_STORAGE_MB"),
    runningGpus: optionalInt(env, "QUOTA_RUNNING_GPUS") ?? null,
    queuedJobs: int(env, "QUOTA_QUEUED_JOBS", 1000),
    // Parsed as inference parses them ("unlimited" included): the default must not differ by reader.
    requestsPerMinute: perMinute(env, "INFERENCE_RPM"),
    tokensPerMinute: perMinute(env, "INFERENCE_TPM"),
    fairShareWeight: 1,
  },
});
