/**
 * `inference.completed`: emitted by the inference service once per finished inference (any
 * outcome), read by the metrics service (services/metrics). Shape and check live here, with the
 * emitter; the name is in lib/event-names.ts, for the bus-permission table.
 */
import type { InferenceRecord } from "./attempt-log";

/**
 * The event's payload (no provider: the model was not found). Readers take `outcome` as any
 * string and `tokensUsed` as possibly null, so a newer or older emitter is still counted.
 */
export type InferenceCompleted = { model: string; provider: string | null; tokensUsed: number | null; durationMs: number; outcome: string };

export const inferenceCompleted = ({ model, provider, tokensUsed, durationMs, outcome }: InferenceRecord): InferenceCompleted => ({
  model,
  provider,
  tokensUsed,
  durationMs,
  outcome,
});

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isString = (v: unknown): v is string => typeof v === "string" && v.length > 0;

/** Shape check of the payload as a reader receives it (an event handler must never throw on it). */
export function isInferenceCompleted(v: unknown): v is InferenceCompleted {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const e = v as Record<string, unknown>;
  return (
    isString(e.model) &&
    (e.provider === null || isString(e.provider)) &&
    isString(e.outcome) &&
    (e.tokensUsed === undefined || e.tokensUsed === null || isNumber(e.tokensUsed)) &&
    isNumber(e.durationMs)
  );
}
