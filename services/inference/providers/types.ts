/** What every model provider adapter offers the inference service, whatever its wire format. */

export type ChatMessage = { role: "system" | "user" | "assistant"; content: string };

/** Sampling options, each mapped to the provider's own name; absent ones are left to the provider. */
export type ChatOptions = {
  temperature?: number;
  maxTokens?: number;
  topP?: number;
  stop?: string[];
  seed?: number;
  /** The end user, for the provider's abuse monitoring (OpenAI-compatible providers only). */
  user?: string;
};

export type ChatRequest = ChatOptions & {
  /** The provider's own model id. */
  model: string;
  messages: ChatMessage[];
};

export type Usage = { promptTokens: number; completionTokens: number };

/** Set only when the answer was cut at maxTokens ("stop" otherwise). */
export type Finish = { finishReason?: "length" };

export type Completion = Usage & Finish & { text: string };

/** A streamed answer: text deltas, then exactly one usage chunk when the provider finished. */
export type StreamChunk = { type: "delta"; text: string } | ({ type: "usage" } & Usage & Finish);

export type Embeddings = { vectors: number[][]; promptTokens: number };

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
  /** One vector per input, in input order. */
  embed(model: string, input: string[], signal: AbortSignal): Promise<Embeddings>;
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

export const isVector = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === "number" && Number.isFinite(x));
