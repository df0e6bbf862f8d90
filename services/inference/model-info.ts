/**
 * What the model list says about a model: `parameterSize` always in the form `<number>B`, and a
 * description built from what the provider reports. Pure functions, tested with tables.
 */

/** Billions of parameters as `<number>B`: one decimal at most, at least 0.1 (494.03M → 0.5B). */
export function formatBillions(billions: number): string | undefined {
  if (!Number.isFinite(billions) || billions <= 0) return undefined;
  const rounded = Math.max(0.1, Math.round(billions * 10) / 10);
  return `${Number(rounded.toFixed(1))}B`;
}

const UNIT: Record<string, number> = { K: 1e-6, M: 1e-3, B: 1, T: 1e3 };

/** A provider's own figure: "8.0B", "494.03M", "1.5T", "7b". */
export function parseReportedSize(reported: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([KMBT])\s*$/i.exec(reported);
  return match ? Number(match[1]) * UNIT[match[2].toUpperCase()] : undefined;
}

/**
 * The size a model's name states: "llama3.2:1b" → 1, "qwen2.5-0.5b-instruct" → 0.5,
 * "Llama-3.1-8B-Instruct" → 8, "gemma3:270m" → 0.27, "mixtral:8x7b" → 56 (experts × size).
 * The number must stand alone ("llama3.2" and "a3b" are not sizes).
 */
export function sizeFromName(name: string): number | undefined {
  const match = /(?:^|[^a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)([bm])(?![a-z0-9])/i.exec(name);
  if (!match) return undefined;
  const experts = match[1] ? Number(match[1]) : 1;
  return experts * Number(match[2]) * (match[3].toLowerCase() === "m" ? 1e-3 : 1);
}

/** Bits per weight of common GGUF quantizations, roughly (Q4_K_M ≈ 4.5, F16 = 16). */
export function bitsPerWeight(quantization: string): number | undefined {
  const q = quantization.toUpperCase();
  if (q === "F32") return 32;
  if (q === "F16" || q === "BF16") return 16;
  const match = /^I?Q(\d)/.exec(q);
  return match ? Number(match[1]) + 0.5 : undefined;
}

export type SizeHints = {
  /** The provider's own figure (Ollama's details.parameter_size). */
  reported?: string;
  /** A parameter count (llama.cpp's meta.n_params). */
  params?: number;
  name: string;
  /** File size and quantization, the last resort. */
  sizeBytes?: number;
  quantization?: string;
};

/** "0B" means unknown: nothing the provider reports states or implies a size. */
export const UNKNOWN_SIZE = "0B";

export function parameterSizeOf(hints: SizeHints): string {
  const fromReported = hints.reported ? parseReportedSize(hints.reported) : undefined;
  const fromParams = hints.params !== undefined ? hints.params / 1e9 : undefined;
  const bits = hints.quantization ? bitsPerWeight(hints.quantization) : undefined;
  const fromFile = hints.sizeBytes && bits ? (hints.sizeBytes * 8) / bits / 1e9 : undefined;
  for (const candidate of [fromReported, fromParams, sizeFromName(hints.name), fromFile]) {
    const formatted = candidate !== undefined ? formatBillions(candidate) : undefined;
    if (formatted) return formatted;
  }
  return UNKNOWN_SIZE;
}

export type DescriptionHints = {
  provider: string;
  parameterSize: string;
  family?: string;
  quantization?: string;
  format?: string;
  owner?: string;
};

/** "llama model with 3.2B parameters (Q4_K_M, GGUF), served by ollama". */
export function describeModel(h: DescriptionHints): string {
  const size = h.parameterSize === UNKNOWN_SIZE ? "of unknown size" : `with ${h.parameterSize} parameters`;
  const encoding = [h.quantization, h.format?.toUpperCase()].filter(Boolean).join(", ");
  const owner = h.owner && h.owner !== h.provider ? ` (owned by ${h.owner})` : "";
  return `${h.family ? `${h.family} model` : "Model"} ${size}${encoding ? ` (${encoding})` : ""}, served by ${h.provider}${owner}`;
}

/** About four characters a token: used only where a provider does not count. */
export const estimateTokens = (text: string): number => (text ? Math.ceil(text.length / 4) : 0);
