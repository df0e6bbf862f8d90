/** The inference service's settings (README "Configuration" and "Inference"), parsed when it is created. */
import { Env, httpUrl, int } from "../../lib/settings";

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
};

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
  };
}
