/** The inference service's settings (README "Configuration" and "Inference"), parsed when it is created. */
import { Env, httpUrl, int, intAtLeast, perMinute, SettingError } from "../../lib/settings";
import { BatchSettings, parseBatchSettings } from "./batches/batch-settings";

export type OpenAiProviderConfig = { name: string; url: string; apiKey?: string };

export type InferenceSettings = {
  /** Ollama's base URL; undefined: no Ollama provider (OLLAMA_URL empty or "off"). */
  ollamaUrl?: string;
  /** OpenAI-compatible providers: a JSON list of { name, url, apiKey? }. */
  openaiProviders: OpenAiProviderConfig[];
  /** No answer from a provider within this long is 504 (streams: no chunk within it). */
  timeoutMs: number;
  /** How long the merged model list is cached (a list missing a provider: at most 5 s). */
  modelsCacheS: number;
  /** MODEL_FALLBACKS: model → the models tried next, in order, when it fails before its first token. */
  fallbacks: Record<string, string[]>;
  /** INFERENCE_RPM / INFERENCE_TPM: every account's default per-minute limits; null: unlimited. */
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  /** QUOTA_RESERVE_MAX_TOKENS: the completion tokens a request without `max_tokens` reserves of the monthly token quota. */
  reserveMaxTokens: number;
  /** QUOTA_RESERVATION_TTL_S: a reservation a crashed replica never settled is released after this long. */
  reservationTtlS: number;
  /** DEPLOYMENTS_TICK_MS: how often the model deployments' controller looks at their replicas (a request waiting for one wakes it at once). */
  deploymentsTickMs: number;
  /** The Batch API's (BATCH_*). */
  batch: BatchSettings;
};

/** The most models one request may try (its own and its fallbacks): each failure costs a provider call. */
export const MAX_FALLBACKS = 5;

const FALLBACKS_SHAPE = `a JSON object {"model": ["fallback", …]} (at most ${MAX_FALLBACKS} fallbacks each)`;

/** MODEL_FALLBACKS='{"llama3.2:1b": ["qwen2.5:0.5b"]}'. */
export function parseModelFallbacks(raw: string | undefined): Record<string, string[]> {
  // No prototype: a model named "constructor" must not find Object's.
  const out: Record<string, string[]> = Object.create(null);
  if (raw === undefined || raw.trim() === "") return out;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new SettingError("MODEL_FALLBACKS", raw, FALLBACKS_SHAPE);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new SettingError("MODEL_FALLBACKS", raw, FALLBACKS_SHAPE);
  for (const [model, list] of Object.entries(value)) {
    const ok = Array.isArray(list) && list.length <= MAX_FALLBACKS && list.every((m) => typeof m === "string" && m.trim() !== "");
    if (!ok || model.trim() === "") throw new SettingError("MODEL_FALLBACKS", raw, FALLBACKS_SHAPE);
    out[model.trim()] = (list as string[]).map((m) => m.trim());
  }
  return out;
}

const PROVIDER_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

/** OPENAI_PROVIDERS='[{"name":"vllm","url":"http://127.0.0.1:8000","apiKey":"…"}]'; names are lowercased. */
export function parseOpenAiProviders(raw: string | undefined): OpenAiProviderConfig[] {
  if (raw === undefined || raw.trim() === "") return [];
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    throw new Error("OPENAI_PROVIDERS must be a JSON list of {name, url, apiKey?}");
  }
  if (!Array.isArray(list)) throw new Error("OPENAI_PROVIDERS must be a JSON list of {name, url, apiKey?}");
  return list.map((entry: { name?: unknown; url?: unknown; apiKey?: unknown }, i) => {
    const name = typeof entry?.name === "string" ? entry.name.trim().toLowerCase() : "";
    if (!PROVIDER_NAME.test(name)) throw new Error(`OPENAI_PROVIDERS[${i}].name must match ${PROVIDER_NAME}`);
    const url = typeof entry.url === "string" ? entry.url.trim() : "";
    if (!/^https?:\/\/[^/]/.test(url)) throw new Error(`OPENAI_PROVIDERS[${i}].url must be an http(s) URL`);
    if (entry.apiKey !== undefined && typeof entry.apiKey !== "string") throw new Error(`OPENAI_PROVIDERS[${i}].apiKey must be a string`);
    return { name, url, ...(entry.apiKey ? { apiKey: entry.apiKey } : {}) };
  });
}

/** OLLAMA_URL: unset is the local default; empty or "off" configures no Ollama provider. */
export function parseOllamaUrl(raw: string | undefined): string | undefined {
  if (raw === undefined) return "http://127.0.0.1:11434";
  return raw.trim() === "" || raw.trim().toLowerCase() === "off" ? undefined : httpUrl("OLLAMA_URL", raw);
}

export function parseInferenceSettings(env: Env): InferenceSettings {
  return {
    ollamaUrl: parseOllamaUrl(env.OLLAMA_URL),
    openaiProviders: parseOpenAiProviders(env.OPENAI_PROVIDERS),
    timeoutMs: int(env, "INFERENCE_TIMEOUT_MS", 120_000),
    modelsCacheS: int(env, "MODELS_CACHE_S", 30),
    fallbacks: parseModelFallbacks(env.MODEL_FALLBACKS),
    requestsPerMinute: perMinute(env, "INFERENCE_RPM"),
    tokensPerMinute: perMinute(env, "INFERENCE_TPM"),
    reserveMaxTokens: intAtLeast(env, "QUOTA_RESERVE_MAX_TOKENS", 4096, 1),
    reservationTtlS: intAtLeast(env, "QUOTA_RESERVATION_TTL_S", 900, 1),
    deploymentsTickMs: intAtLeast(env, "DEPLOYMENTS_TICK_MS", 1000, 50),
    batch: parseBatchSettings(env),
  };
}
