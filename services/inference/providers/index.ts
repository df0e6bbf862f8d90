/** The providers the operator configured, in configuration order (Ollama first). */
import type { OpenAiProviderConfig } from "../settings";
import { OllamaProvider } from "./ollama";
import { OpenAiProvider } from "./openai";
import type { Provider } from "./types";

export function createProviders(opts: { ollamaUrl?: string; openai: OpenAiProviderConfig[] }): Provider[] {
  const providers: Provider[] = [];
  if (opts.ollamaUrl) providers.push(new OllamaProvider(opts.ollamaUrl));
  for (const p of opts.openai) providers.push(new OpenAiProvider(p.name, p.url, p.apiKey));
  const seen = new Set<string>();
  for (const p of providers) {
    // Each name is a field of the health answer and the prefix of shadowed models: it must be unique.
    if (seen.has(p.name)) throw new Error(`Two model providers are named "${p.name}" (OLLAMA_URL / OPENAI_PROVIDERS)`);
    seen.add(p.name);
  }
  return providers;
}

export * from "./types";
