/** What every model provider adapter offers the inference service, whatever its wire format. */

export type ChatRequest = {
  /** The provider's own model id. */
  model: string;
  prompt: string;
  systemPrompt?: string;
  temperature: number;
  maxTokens: number;
};

export type Usage = { promptTokens: number; completionTokens: number };

export type Completion = Usage & { text: string };

/** A streamed answer: text deltas, then exactly one usage chunk when the provider finished. */
export type StreamChunk = { type: "delta"; text: string } | ({ type: "usage" } & Usage);

export type ProviderModel = { id: string; parameterSize: string; description: string };

export interface Provider {
  /** Lowercase name: the `provider` of its models and its field in the health answer. */
  readonly name: string;
  listModels(signal: AbortSignal): Promise<ProviderModel[]>;
  /** Resolves when the provider answers, throws a ProviderFailure when it does not. */
  ping(signal: AbortSignal): Promise<void>;
  complete(request: ChatRequest, signal: AbortSignal): Promise<Completion>;
  /**
   * Resolves once the provider accepted the request (so refusals are plain errors, not stream
   * events); the iterator ends normally only after the provider said it finished.
   */
  stream(request: ChatRequest, signal: AbortSignal): Promise<AsyncIterable<StreamChunk>>;
}

/**
 * How a provider call failed, independent of the API's error codes:
 * unavailable (no connection), error (HTTP ≥ 400, malformed or cut-off output), not_found (the
 * provider does not know the model), timeout, aborted (our client went away).
 */
export type FailureKind = "unavailable" | "error" | "not_found" | "timeout" | "aborted";

export class ProviderFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    /** The provider's HTTP status, when it answered with one. */
    readonly status?: number,
  ) {
    super(message);
    this.name = "ProviderFailure";
  }
}
