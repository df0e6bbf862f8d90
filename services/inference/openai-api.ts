/**
 * The OpenAI-compatible API's requests and answers (POST /v1/chat/completions, POST
 * /v1/embeddings, GET /v1/models), as OpenAI's API reference defines them, translated to and from
 * the engine's. Pure: bad input is a list of `{ field, message }` (the field is OpenAI's `param`);
 * what the platform cannot do (functions, n > 1, images, audio, logprobs) is refused by name
 * instead of being silently dropped, and so is a field OpenAI's API does not have (the accepted
 * fields: openai-fields.ts). Tools and structured output: openai-api-tools.ts.
 */
import { ErrorCodes, FieldError, validationFailed } from "../../lib/errors";
import { unknownFieldsOf } from "../../lib/known-fields";
import { openAiError } from "../../lib/openai-errors";
import type { Answer, ChatParams, Embedded, StreamFormat } from "./engine";
import type { PublicFailure } from "./errors";
import type { ChatMessage } from "./providers";
import { MAX_FALLBACKS } from "./settings";
import { CHAT_COMPLETION_FIELDS, EMBEDDINGS_FIELDS } from "./openai-fields";
import { historyCallsOf, toolCallDelta, toolFieldsOf, toolMessageOf, wireToolCalls } from "./openai-api-tools";

export type ChatCompletionRequest = ChatParams & { stream: boolean; includeUsage: boolean };
export type EmbeddingsRequest = { model: string; input: string[]; base64: boolean };

const MAX_MODEL = 256;
const MAX_MESSAGES = 4096;
const MAX_INPUTS = 2048;
/** Fields that ask for what the platform does not do, unless they hold their "off" value. */
const UNSUPPORTED: Array<[field: string, isOff: (v: unknown) => boolean, what: string]> = [
  ["functions", (v) => Array.isArray(v) && v.length === 0, "Functions are not supported (deprecated by OpenAI): use tools"],
  ["function_call", (v) => v === "none", "Functions are not supported (deprecated by OpenAI): use tool_choice"],
  ["n", (v) => v === 1, "Only one choice (n = 1) is supported"],
  ["logprobs", (v) => v === false, "logprobs are not supported"],
  ["top_logprobs", (v) => v === 0, "logprobs are not supported"],
  ["audio", () => false, "Audio is not supported"],
  ["modalities", (v) => Array.isArray(v) && v.every((m) => m === "text"), "Only the text modality is supported"],
  ["logit_bias", (v) => typeof v === "object" && v !== null && Object.keys(v).length === 0, "logit_bias is not supported"],
  ["prediction", () => false, "Predicted outputs are not supported"],
  ["web_search_options", () => false, "Web search is not supported"],
];

type Body = Record<string, unknown>;
export const given = (body: Body, field: string) => body[field] !== undefined && body[field] !== null;
export const isText = (v: unknown, max = Infinity): v is string => typeof v === "string" && v.trim() !== "" && v.length <= max;

export function objectBody(raw: unknown): Body {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw validationFailed([{ field: "(body)", message: "must be a JSON object" }]);
  return raw as Body;
}

/** The faults found, unrecognized fields first and named in the message as OpenAI's API names them. */
export function refusal(errors: FieldError[], unknown: number) {
  const names = errors.slice(0, unknown).map((e) => e.field);
  return validationFailed(errors, unknown ? `Unrecognized request argument supplied: ${names.join(", ")}` : undefined);
}

export function number(body: Body, field: string, min: number, max: number, errors: FieldError[], integer = false): number | undefined {
  if (!given(body, field)) return undefined;
  const v = body[field];
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    errors.push({ field, message: `must be ${integer ? "an integer" : "a number"} from ${min} to ${max}` });
    return undefined;
  }
  return v;
}

/** A message's text: a string, or text content parts joined (anything else is refused). */
function contentOf(content: unknown, field: string, role: string, errors: FieldError[]): string {
  if (typeof content === "string") return content;
  if (content === null && role === "assistant") return "";
  if (!Array.isArray(content)) {
    errors.push({ field, message: "must be a string or an array of text content parts" });
    return "";
  }
  let text = "";
  content.forEach((part: { type?: unknown; text?: unknown }, i) => {
    if (part?.type === "text" && typeof part.text === "string") text += part.text;
    else errors.push({ field: `${field}[${i}]`, message: `Content parts of type "${String(part?.type)}" are not supported: only "text"` });
  });
  return text;
}

function messagesOf(raw: unknown, errors: FieldError[]): ChatMessage[] {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_MESSAGES) {
    errors.push({ field: "messages", message: `must be a list of 1 to ${MAX_MESSAGES} messages` });
    return [];
  }
  const calls = new Set<string>(); // the ids of the history's tool calls, which tool messages answer
  return raw.map((m: { role?: unknown; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown }, i): ChatMessage => {
    const field = `messages[${i}]`;
    const role = m?.role === "developer" ? "system" : m?.role;
    if (role !== "system" && role !== "user" && role !== "assistant" && role !== "tool") {
      errors.push({
        field: `${field}.role`,
        message:
          role === "function"
            ? 'Messages of role "function" are not supported (deprecated by OpenAI): use "tool"'
            : 'must be "system", "developer", "user", "assistant" or "tool"',
      });
      return { role: "user", content: "" };
    }
    // An assistant message that made tool calls may have no content.
    const content = role === "assistant" && m.content === undefined ? "" : contentOf(m.content, `${field}.content`, role, errors);
    if (role === "tool") return toolMessageOf(m.tool_call_id, content, field, calls, errors);
    if (role !== "assistant") {
      if (m.tool_calls !== undefined && m.tool_calls !== null)
        errors.push({ field: `${field}.tool_calls`, message: "Only assistant messages carry tool calls" });
      return { role, content };
    }
    const toolCalls = historyCallsOf(m.tool_calls, `${field}.tool_calls`, calls, errors);
    return toolCalls ? { role, content, toolCalls } : { role, content };
  });
}

function stopOf(body: Body, errors: FieldError[]): string[] | undefined {
  if (!given(body, "stop")) return undefined;
  const list = typeof body.stop === "string" ? [body.stop] : body.stop;
  if (!Array.isArray(list) || list.length > 4 || !list.every((s) => typeof s === "string" && s !== "")) {
    errors.push({ field: "stop", message: "must be a string or a list of up to 4 strings" });
    return undefined;
  }
  return list as string[];
}

/** The model and its fallbacks: `model`, then the request's `models` (OpenRouter's field). */
export function modelsOf(body: Body, errors: FieldError[]): { model: string; fallbacks?: string[] } {
  let fallbacks: string[] | undefined;
  if (given(body, "models")) {
    const list = body.models;
    if (!Array.isArray(list) || list.length === 0 || list.length > MAX_FALLBACKS + 1 || !list.every((m) => isText(m, MAX_MODEL)))
      errors.push({ field: "models", message: `must be a list of 1 to ${MAX_FALLBACKS + 1} model names` });
    else fallbacks = (list as string[]).map((m) => m.trim());
  }
  if (isText(body.model, MAX_MODEL)) return { model: body.model.trim(), fallbacks: fallbacks ?? undefined };
  if (!given(body, "model") && fallbacks) return { model: fallbacks[0], fallbacks: fallbacks.slice(1) };
  errors.push({ field: "model", message: `must be a model name (1 to ${MAX_MODEL} characters)` });
  return { model: "" };
}

export function parseChatCompletion(raw: unknown): ChatCompletionRequest {
  const body = objectBody(raw);
  const errors: FieldError[] = unknownFieldsOf(body, CHAT_COMPLETION_FIELDS);
  const unknown = errors.length;
  const { model, fallbacks } = modelsOf(body, errors);
  const messages = messagesOf(body.messages, errors);
  for (const [field, isOff, what] of UNSUPPORTED) if (given(body, field) && !isOff(body[field])) errors.push({ field, message: what });
  const temperature = number(body, "temperature", 0, 2, errors);
  const topP = number(body, "top_p", 0, 1, errors);
  const maxTokens = number(body, "max_completion_tokens", 1, 1_000_000, errors, true) ?? number(body, "max_tokens", 1, 1_000_000, errors, true);
  const seed = number(body, "seed", Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, errors, true);
  const stop = stopOf(body, errors);
  const toolFields = toolFieldsOf(body, errors);
  if (given(body, "user") && !(typeof body.user === "string" && body.user.length <= 256))
    errors.push({ field: "user", message: "must be a string of at most 256 characters" });
  if (given(body, "stream") && typeof body.stream !== "boolean") errors.push({ field: "stream", message: "must be a boolean" });
  const streamOptions = body.stream_options as { include_usage?: unknown } | null | undefined;
  if (given(body, "stream_options") && (typeof streamOptions !== "object" || Array.isArray(streamOptions)))
    errors.push({ field: "stream_options", message: "must be an object" });
  if (errors.length) throw refusal(errors, unknown);
  const user = typeof body.user === "string" && body.user ? body.user : undefined;
  return {
    model,
    ...(fallbacks ? { fallbacks } : {}),
    messages,
    temperature,
    topP,
    maxTokens,
    seed,
    stop,
    user,
    ...toolFields,
    stream: body.stream === true,
    includeUsage: streamOptions?.include_usage === true,
  };
}

export function parseEmbeddings(raw: unknown): EmbeddingsRequest {
  const body = objectBody(raw);
  const errors: FieldError[] = unknownFieldsOf(body, EMBEDDINGS_FIELDS);
  const unknown = errors.length;
  if (!isText(body.model, MAX_MODEL)) errors.push({ field: "model", message: `must be a model name (1 to ${MAX_MODEL} characters)` });
  const input = typeof body.input === "string" ? [body.input] : body.input;
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_INPUTS || !input.every((s) => typeof s === "string" && s !== ""))
    errors.push({ field: "input", message: `must be a non-empty string or a list of 1 to ${MAX_INPUTS} (only text input is supported, not token arrays)` });
  const format = body.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") errors.push({ field: "encoding_format", message: 'must be "float" or "base64"' });
  if (given(body, "dimensions")) errors.push({ field: "dimensions", message: "dimensions is not supported" });
  if (errors.length) throw refusal(errors, unknown);
  return { model: (body.model as string).trim(), input: input as string[], base64: format === "base64" };
}

const completionId = (id: string) => `chatcmpl-${id}`;
const usageOf = (a: Answer) => ({ prompt_tokens: a.promptTokens, completion_tokens: a.completionTokens, total_tokens: a.promptTokens + a.completionTokens });

/** OpenAI's message: content null when the answer is only tool calls. */
function messageOf(a: Answer) {
  if (!a.toolCalls?.length) return { role: "assistant", content: a.text, refusal: null };
  return { role: "assistant", content: a.text || null, refusal: null, tool_calls: wireToolCalls(a.toolCalls) };
}

const finishOf = (a: Answer) => a.finishReason ?? (a.toolCalls?.length ? "tool_calls" : "stop");

export function chatCompletion(a: Answer, created: number) {
  return {
    id: completionId(a.id),
    object: "chat.completion",
    created,
    model: a.model,
    choices: [{ index: 0, message: messageOf(a), logprobs: null, finish_reason: finishOf(a) }],
    usage: usageOf(a),
  };
}

/**
 * OpenAI's chunks: the first delta carries the role, tool calls come as `delta.tool_calls` parts,
 * a last chunk carries the finish reason, then usage if asked for, then [DONE].
 */
export function openAiStreamFormat(includeUsage: boolean, created: number): StreamFormat {
  let first = true;
  const chunk = (id: string, model: string, choices: unknown[], usage?: unknown) =>
    `data: ${JSON.stringify({ id: completionId(id), object: "chat.completion.chunk", created, model, choices, ...(includeUsage ? { usage: usage ?? null } : {}) })}\n\n`;
  const deltaChunk = (id: string, model: string, delta: Record<string, unknown>) => {
    const withRole = first ? { role: "assistant", ...delta } : delta;
    first = false;
    return chunk(id, model, [{ index: 0, delta: withRole, logprobs: null, finish_reason: null }]);
  };
  return {
    delta: (id, model, content) => deltaChunk(id, model, { content }),
    // A first delta that is a tool call has no text: content null, as OpenAI sends it.
    toolCall: (id, model, part) => deltaChunk(id, model, { ...(first ? { content: null } : {}), tool_calls: [toolCallDelta(part)] }),
    done(a) {
      const last = chunk(a.id, a.model, [{ index: 0, delta: {}, logprobs: null, finish_reason: finishOf(a) }]);
      return `${last}${includeUsage ? chunk(a.id, a.model, [], usageOf(a)) : ""}data: [DONE]\n\n`;
    },
    error: (f: PublicFailure) => `data: ${JSON.stringify(openAiError(ErrorCodes[f.code], f.code, f.message, f.details))}\n\n`,
  };
}

export function embeddingList(e: Embedded, base64: boolean) {
  const encode = (v: number[]) => (base64 ? Buffer.from(new Float32Array(v).buffer).toString("base64") : v);
  return {
    object: "list",
    data: e.vectors.map((v, index) => ({ object: "embedding", index, embedding: encode(v) })),
    model: e.model,
    usage: { prompt_tokens: e.promptTokens, total_tokens: e.promptTokens },
  };
}

/** OpenAI's model list, carrying Anthropic's fields too (`type`, `display_name`, `created_at`; one page): both official clients read it. */
export const modelList = (models: Array<{ name: string; provider: string }>, created: number) => ({
  object: "list",
  data: models.map((m) => ({
    id: m.name,
    object: "model",
    created,
    owned_by: m.provider,
    type: "model",
    display_name: m.name,
    created_at: new Date(created * 1000).toISOString(),
  })),
  has_more: false,
  first_id: models[0]?.name ?? null,
  last_id: models.at(-1)?.name ?? null,
});
