/**
 * Credits: what the operator charges for GPU-seconds (per GPU type), tokens (per model) and
 * storage (per GB-hour). Each price is a number, or a JSON map by name with a `default`; a name
 * matches a key equal to it, else one contained in it (case-insensitive, as `gpuType` matches
 * cards), else the default. 0 is free. Pure.
 */
import { SettingError } from "../../lib/settings";
import type { Price } from "../../lib/usage-protocol";

const validPrice = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;

/** CREDITS_PER_*: unset = 0 (free); a bad value throws naming the variable. */
export function parsePrice(name: string, raw: string | undefined): Price {
  const text = (raw ?? "").trim();
  if (text === "") return { byName: [], fallback: 0 };
  const expected = 'a number ≥ 0 or a JSON object of numbers ≥ 0 by name (with "default")';
  if (!text.startsWith("{")) {
    const value = Number(text);
    if (!validPrice(value)) throw new SettingError(name, text, expected);
    return { byName: [], fallback: value };
  }
  let map: unknown;
  try {
    map = JSON.parse(text);
  } catch {
    throw new SettingError(name, text, expected);
  }
  if (typeof map !== "object" || map === null || Array.isArray(map)) throw new SettingError(name, text, expected);
  const entries = Object.entries(map as Record<string, unknown>);
  if (entries.some(([k, v]) => !k.trim() || !validPrice(v))) throw new SettingError(name, text, expected);
  const fallback = entries.find(([k]) => k === "default")?.[1] as number | undefined;
  return { byName: entries.filter(([k]) => k !== "default").map(([k, v]) => [k.toLowerCase(), v as number] as const), fallback: fallback ?? 0 };
}

export function priceOf(price: Price, name: string): number {
  const lower = name.toLowerCase();
  const exact = price.byName.find(([k]) => k === lower);
  if (exact) return exact[1];
  const part = price.byName.find(([k]) => lower.includes(k));
  return part ? part[1] : price.fallback;
}
