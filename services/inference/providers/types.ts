/** What every model provider adapter offers the inference service, whatever its wire format. */

/** A call of one function tool: `arguments` is the JSON text of its arguments (always valid JSON once whole). */
export type ToolCall = { id: string; name: string; arguments: string };

/**
 * One message of a chat. An assistant message may carry the tool calls it made; a `tool` message
 * is the result of one of them (`toolCallId` names the call).
 */
export type ChatMessage =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string; toolCalls?: ToolCall[] }
  | { role: "tool"; content: string; toolCallId: string };

/** A function tool the model may call: `parameters` is a JSON Schema of its arguments. */
export type ToolSpec = { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };

/** Whether the model may, must, or must not call tools, or must call the one named. */
export type ToolChoice = "none" | "auto" | "required" | { name: string };

/** Structured output: any JSON object, or JSON matching `schema`. */
export type ResponseFormat =
  { type: "json_object" } | { type: "json_schema"; name: string; description?: string; schema: Record<string, unknown>; strict?: boolean };

/** Sampling options, each mapped to the provider's own name; absent ones are left to the provider. */
export type ChatOptions = {
  temperature?: number;
  maxTokens?: number;
  topP?: number;
  stop?: string[];
  seed?: number;
  /** The end user, for the provider's abuse monitoring (OpenAI-compatible providers only). */
  user?: string;
  /** Function tools (absent: none offered). */
  tools?: ToolSpec[];
  toolChoice?: ToolChoice;
  /** False: at most one tool call per answer (absent: the provider's default). */
  parallelToolCalls?: boolean;
  responseFormat?: ResponseFormat;
};

export type ChatRequest = ChatOptions & {
  /** The provider's own model id. */
  model: string;
  messages: ChatMessage[];
};

export type Usage = { promptTokens: number; completionTokens: number };

/** Set only when the answer was cut at maxTokens, or ended to call tools ("stop" otherwise). */
export type Finish = { finishReason?: "length" | "tool_calls" };

/** A whole answer: its text, and the tool calls it made (absent or empty: none). */
export type Completion = Usage & Finish & { text: string; toolCalls?: ToolCall[] };

/**
 * A part of a streamed tool call. The first part of call `index` carries its `id` and `name`;
 * `arguments` fragments follow (the first part may carry one too), and joined in order they are
 * the whole JSON text of its arguments.
 */
export type ToolCallDelta = { index: number; id?: string; name?: string; arguments: string };

/** A streamed answer: text deltas and tool call parts, then exactly one usage chunk when the provider finished. */
export type StreamChunk = { type: "delta"; text: string } | ({ type: "tool_call" } & ToolCallDelta) | ({ type: "usage" } & Usage & Finish);

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
 * provider does not know the model), timeout, aborted (our client went away), unsupported (the
 * provider or model cannot honour a request field: `param` names it, as OpenAI's API names it).
 */
export type FailureKind = "unavailable" | "error" | "not_found" | "timeout" | "aborted" | "unsupported";

export class ProviderFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    /** The provider's HTTP status, when it answered with one. */
    readonly status?: number,
    /** The request field an "unsupported" failure is about (`tools`, `tool_choice`, `response_format`…). */
    readonly param?: string,
  ) {
    super(message);
    this.name = "ProviderFailure";
  }
}

/** What a request puts before the model (messages, tool calls, tool definitions), to estimate its tokens. */
export function promptText(request: { messages: ChatMessage[]; tools?: ToolSpec[] }): string {
  const parts = request.messages.map((m) => (m.role === "assistant" && m.toolCalls?.length ? `${m.content}${JSON.stringify(m.toolCalls)}` : m.content));
  if (request.tools?.length) parts.push(JSON.stringify(request.tools));
  return parts.join("\n");
}

export const isVector = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === "number" && Number.isFinite(x));
