/**
 * The record of every attempt at a model, ok or not, told once to `onFinished` (usage accounting,
 * metrics): who asked, which model and provider, the tokens used, how long it took and how it ended.
 */
import type { ModelCatalogue, ModelEntry } from "./catalogue";
import { Outcome, outcomeOf, publicFailure, PublicFailure } from "./errors";
import type { ProviderFailure, Usage } from "./providers";

export type InferenceRecord = {
  id: string;
  clientId: string;
  model: string;
  provider: string | null;
  promptTokens: number;
  completionTokens: number;
  tokensUsed: number;
  durationMs: number;
  outcome: Outcome;
  errorCode: string | null;
  stream: boolean;
};

/** One call to one model's provider; `startedAt` is the request's `performance.now()` (fallbacks included). */
export type Attempt = { id: string; clientId: string; entry: ModelEntry; stream: boolean; startedAt: number };

export type AttemptLogOptions = {
  catalogue: Pick<ModelCatalogue, "invalidate">;
  timeoutMs: number;
  onFinished: (record: InferenceRecord) => void;
};

export const elapsed = (startedAt: number) => Math.round(performance.now() - startedAt);

const NO_USAGE: Usage = { promptTokens: 0, completionTokens: 0 };

export class AttemptLog {
  constructor(private readonly opts: AttemptLogOptions) {}

  /** No provider could take the model (unknown, or its provider unreachable): recorded under the name asked for. */
  unrouted(id: string, clientId: string, model: string, stream: boolean, startedAt: number, errorCode: string): void {
    this.opts.onFinished({ ...baseRecord(id, clientId, model, null, stream), durationMs: elapsed(startedAt), outcome: "error", errorCode });
  }

  answered(a: Attempt, durationMs: number, usage: Usage): void {
    this.finish(a, durationMs, "ok", null, usage);
  }

  /** Records a failed attempt and returns what its client is told; a model the provider no longer has makes the catalogue re-read. */
  failed(a: Attempt, failure: ProviderFailure, usage: Usage = NO_USAGE): PublicFailure {
    const pub = publicFailure(failure, a.entry.provider, a.entry.name, this.opts.timeoutMs);
    if (failure.kind === "not_found") this.opts.catalogue.invalidate();
    const outcome = outcomeOf(failure);
    this.finish(a, elapsed(a.startedAt), outcome, outcome === "aborted" ? null : pub.code, usage);
    return pub;
  }

  private finish(a: Attempt, durationMs: number, outcome: Outcome, errorCode: string | null, usage: Usage): void {
    this.opts.onFinished({
      ...baseRecord(a.id, a.clientId, a.entry.name, a.entry.provider, a.stream),
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      tokensUsed: usage.promptTokens + usage.completionTokens,
      durationMs,
      outcome,
      errorCode,
    });
  }
}

function baseRecord(id: string, clientId: string, model: string, provider: string | null, stream: boolean): InferenceRecord {
  return { id, clientId, model, provider, stream, promptTokens: 0, completionTokens: 0, tokensUsed: 0, durationMs: 0, outcome: "ok", errorCode: null };
}
