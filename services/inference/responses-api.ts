/**
 * OpenAI's Responses API (POST /v1/responses), stateless: the request as the official `openai`
 * client's `responses.create` sends it, translated to the engine's chat (the input items:
 * responses-input.ts), and the engine's answer written as a `response` object with the request's
 * settings echoed, as the client's `Response` type declares them. Pure: bad input is a list of
 * `{ field, message }`; state the platform does not keep (`store: true`, `previous_response_id`,
 * `conversation`) and what it cannot do are refused by name (the accepted fields: openai-fields.ts).
 */
import { apiError, FieldError } from "../../lib/errors";
import { unknownFieldsOf } from "../../lib/known-fields";
import type { Answer, ChatParams } from "./engine";
import type { ResponseFormat, ToolCall, ToolChoice, ToolSpec, Usage } from "./providers";
import { given, modelsOf, number, objectBody, refusal } from "./openai-api";
import { RESPONSES_FIELDS } from "./openai-fields";
import { inputMessages, textFormatOf, toolChoiceOf, toolsOf } from "./responses-input";

export type ResponsesRequest = ChatParams & {
  stream: boolean;
  /** Echoed in the response, as OpenAI does. */
  instructions: string | null;
  metadata: Record<string, unknown> | null;
};

const STATELESS = "The platform's Responses API is stateless: send the whole conversation in `input`";
/** Fields that ask for what the platform does not do, unless they hold their "off" value (null is always off). */
const UNSUPPORTED: Array<[field: string, isOff: (v: unknown) => boolean, what: string]> = [
  ["store", (v) => v === false, `Stored responses are not supported (store must be false or absent). ${STATELESS}`],
  ["previous_response_id", () => false, `previous_response_id is not supported. ${STATELESS}`],
  ["conversation", () => false, `Conversations are not supported. ${STATELESS}`],
  ["background", (v) => v === false, "Background responses are not supported"],
  ["context_management", (v) => Array.isArray(v) && v.length === 0, "Context management (compaction) is not supported"],
  ["include", (v) => Array.isArray(v) && v.length === 0, "Additional output data (include) is not supported"],
  ["prompt", () => false, "Prompt templates are not supported"],
  // `effort` is accepted and ignored, as chat completions' reasoning_effort; summaries cannot be given.
  [
    "reasoning",
    (v) => typeof v === "object" && Object.entries(v as object).every(([k, x]) => k === "effort" || x === null),
    "Reasoning summaries are not supported",
  ],
  ["top_logprobs", (v) => v === 0, "logprobs are not supported"],
  ["truncation", (v) => v === "disabled", 'Only truncation "disabled" is supported'],
];

type Body = Record<string, unknown>;

function optional<T>(body: Body, field: string, ok: (v: unknown) => v is T, what: string, errors: FieldError[]): T | undefined {
  if (!given(body, field)) return undefined;
  if (ok(body[field])) return body[field] as T;
  errors.push({ field, message: `must be ${what}` });
  return undefined;
}
const isString = (v: unknown): v is string => typeof v === "string";
const isBoolean = (v: unknown): v is boolean => typeof v === "boolean";
const isMetadata = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length <= 16 && Object.values(v).every(isString);

export function parseResponseCreate(raw: unknown): ResponsesRequest {
  const body = objectBody(raw);
  const errors: FieldError[] = unknownFieldsOf(body, RESPONSES_FIELDS);
  const unknown = errors.length;
  const { model, fallbacks } = modelsOf(body, errors);
  for (const [field, isOff, what] of UNSUPPORTED) if (given(body, field) && !isOff(body[field])) errors.push({ field, message: what });
  const instructions = optional(body, "instructions", isString, "a string (only text instructions are supported)", errors);
  const messages = inputMessages(body.input, instructions, errors);
  const tools = toolsOf(body.tools, errors);
  const toolChoice = toolChoiceOf(body.tool_choice, tools, errors);
  const parallelToolCalls = optional(body, "parallel_tool_calls", isBoolean, "a boolean", errors);
  const responseFormat = textFormatOf(body.text, errors);
  const temperature = number(body, "temperature", 0, 2, errors);
  const topP = number(body, "top_p", 0, 1, errors);
  const maxTokens = number(body, "max_output_tokens", 1, 1_000_000, errors, true);
  const user = optional(body, "user", (v): v is string => isString(v) && v.length <= 256, "a string of at most 256 characters", errors);
  const metadata = optional(body, "metadata", isMetadata, "an object of at most 16 string values", errors);
  const stream = optional(body, "stream", isBoolean, "a boolean", errors);
  if (errors.length) throw refusal(errors, unknown);
  return {
    model,
    ...(fallbacks ? { fallbacks } : {}),
    messages,
    ...(tools ? { tools } : {}),
    ...(toolChoice ? { toolChoice } : {}),
    ...(parallelToolCalls !== undefined ? { parallelToolCalls } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    temperature,
    topP,
    maxTokens,
    user: user || undefined,
    stream: stream === true,
    instructions: instructions ?? null,
    metadata: metadata ?? null,
  };
}

/** The fields a provider's refusal names as chat completions do (the engine's words), in the Responses API's words. */
const RESPONSES_PARAMS = new Map([
  ["response_format", "text.format"],
  ["messages", "input"],
]);

/** A provider's refusal of a field (400 VALIDATION_FAILED from the engine) naming it as this API does; any other error as it is. */
export function inResponsesTerms(err: unknown): unknown {
  const { type, message, data } = (err ?? {}) as { type?: unknown; message?: unknown; data?: unknown };
  if (type !== "VALIDATION_FAILED" || !Array.isArray(data) || !data.some((d: FieldError) => RESPONSES_PARAMS.has(d.field))) return err;
  const reword = (text: string) => text.replace(/`(response_format|messages)`/g, (_, f: string) => `\`${RESPONSES_PARAMS.get(f)}\``);
  const details = (data as FieldError[]).map((d) => ({ field: RESPONSES_PARAMS.get(d.field) ?? d.field, message: reword(d.message) }));
  return apiError("VALIDATION_FAILED", reword(String(message)), details);
}

/** The ids of a response and of its output items, all from the inference id (the usage record's). */
export const responseId = (id: string) => `resp_${id}`;
export const messageId = (id: string) => `msg_${id}`;
export const functionCallId = (id: string, n: number) => `fc_${id}_${n}`;

export const outputText = (text: string) => ({ type: "output_text" as const, text, annotations: [], logprobs: [] });

export type ItemStatus = "in_progress" | "completed" | "incomplete";

export const messageItem = (id: string, status: ItemStatus, text?: string) => ({
  type: "message" as const,
  id: messageId(id),
  status,
  role: "assistant" as const,
  content: text === undefined ? [] : [outputText(text)],
});

export const functionCallItem = (id: string, n: number, call: ToolCall, status: ItemStatus) => ({
  type: "function_call" as const,
  id: functionCallId(id, n),
  call_id: call.id,
  name: call.name,
  arguments: call.arguments,
  status,
});

export const responseUsage = (u: Usage) => ({
  input_tokens: u.promptTokens,
  input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
  output_tokens: u.completionTokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: u.promptTokens + u.completionTokens,
});

/** The answer's output: its text as a message (always, unless it only called tools), then its function calls. */
export function outputItems(a: Answer) {
  const calls = a.toolCalls ?? [];
  const text = a.text || !calls.length ? [messageItem(a.id, a.finishReason === "length" ? "incomplete" : "completed", a.text)] : [];
  return [...text, ...calls.map((call, n) => functionCallItem(a.id, n, call, "completed"))];
}

const toolEcho = (t: ToolSpec) => ({
  type: "function",
  name: t.name,
  description: t.description ?? null,
  parameters: t.parameters ?? null,
  strict: t.strict ?? null,
});
const toolChoiceEcho = (c: ToolChoice | undefined) => (c === undefined ? "auto" : typeof c === "string" ? c : { type: "function", name: c.name });
const formatEcho = (f: ResponseFormat | undefined) => f ?? { type: "text" };

/** A response that has not finished yet (`output` empty, no usage): what a stream starts with. */
export function responseShell(id: string, model: string, r: ResponsesRequest, createdAt: number) {
  return {
    id: responseId(id),
    object: "response" as const,
    created_at: createdAt,
    status: "in_progress" as "in_progress" | "completed" | "incomplete" | "failed",
    error: null as { code: string; message: string } | null,
    incomplete_details: null as { reason: "max_output_tokens" } | null,
    instructions: r.instructions,
    max_output_tokens: r.maxTokens ?? null,
    model,
    output: [] as unknown[],
    parallel_tool_calls: r.parallelToolCalls ?? true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: r.temperature ?? null,
    text: { format: formatEcho(r.responseFormat) },
    tool_choice: toolChoiceEcho(r.toolChoice),
    tools: (r.tools ?? []).map(toolEcho),
    top_p: r.topP ?? null,
    truncation: "disabled",
    usage: null as ReturnType<typeof responseUsage> | null,
    metadata: r.metadata,
    ...(r.user ? { user: r.user } : {}),
  };
}

/** The finished response: `incomplete` (reason max_output_tokens) when the answer was cut at the limit. */
export function responseOf(a: Answer, r: ResponsesRequest, createdAt: number) {
  const cut = a.finishReason === "length";
  return {
    ...responseShell(a.id, a.model, r, createdAt),
    status: cut ? ("incomplete" as const) : ("completed" as const),
    incomplete_details: cut ? { reason: "max_output_tokens" as const } : null,
    output: outputItems(a),
    usage: responseUsage(a),
  };
}
