/**
 * The engine's answers in Anthropic's Messages API shapes: a whole `Message` (text and `tool_use`
 * blocks, the stop reason, usage), and a stream's events (`message_start`, then each content
 * block's `content_block_start` / `_delta` / `_stop`, `message_delta` with the stop reason and
 * usage, `message_stop`; a failure is an `error` event). Pure; the requests: anthropic-api.ts.
 * Every nullable field the official client's `Message` type requires is present (null).
 */
import { ErrorCodes } from "../../lib/errors";
import { anthropicError } from "../../lib/anthropic-errors";
import type { Answer, StreamFormat } from "./answers";
import { inMessagesTerms } from "./anthropic-tools";
import type { PublicFailure } from "./errors";
import type { ToolCall } from "./providers";

type StopReason = "end_turn" | "max_tokens" | "tool_use";

export const messageId = (id: string) => `msg_${id}`;
/** Anthropic's tool call ids start with toolu_; a provider's id keeps its own text after it (the client sends it back as is). */
export const toolUseId = (id: string) => (id.startsWith("toolu_") ? id : `toolu_${id}`);

const stopReasonOf = (a: Pick<Answer, "finishReason" | "toolCalls">): StopReason =>
  a.finishReason === "length" ? "max_tokens" : a.finishReason === "tool_calls" || a.toolCalls?.length ? "tool_use" : "end_turn";

/** A call's arguments as the object Anthropic's `input` is (arguments that are not a JSON object: under `arguments`). */
function inputOf(call: ToolCall): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(call.arguments || "{}");
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // not JSON: kept as text below
  }
  return { arguments: call.arguments };
}

const textBlock = (text: string) => ({ type: "text" as const, text, citations: null });
const toolUseBlock = (id: string, name: string, input: Record<string, unknown>) => ({
  type: "tool_use" as const,
  id: toolUseId(id),
  name,
  input,
  caller: { type: "direct" },
});

const usageOf = (input: number, output: number) => ({
  input_tokens: input,
  output_tokens: output,
  cache_creation_input_tokens: null,
  cache_read_input_tokens: null,
  cache_creation: null,
  server_tool_use: null,
  output_tokens_details: null,
  service_tier: null,
  inference_geo: null,
  speed: null,
});

/** The message's frame: everything but its content, stop reason and usage. */
const frame = (id: string, model: string) => ({
  id: messageId(id),
  type: "message" as const,
  role: "assistant" as const,
  model,
  container: null,
  diagnostics: null,
  stop_details: null,
  stop_sequence: null,
});

/** A non-streamed answer: its text (when any, or when it called no tool), then one tool_use block per call. */
export function anthropicMessage(a: Answer) {
  const calls = a.toolCalls ?? [];
  const content = [...(a.text || !calls.length ? [textBlock(a.text)] : []), ...calls.map((c) => toolUseBlock(c.id, c.name, inputOf(c)))];
  return { ...frame(a.id, a.model), content, stop_reason: stopReasonOf(a), usage: usageOf(a.promptTokens, a.completionTokens) };
}

const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

/**
 * A stream's events. Stateful (one per request): the message starts with the first event; a
 * block opens when text follows a tool call or a new call starts, and the open one closes first.
 * A call's argument fragments go to its own block's index.
 */
export function anthropicStreamFormat(): StreamFormat {
  let started = false;
  let open: number | undefined;
  let blocks = 0;
  const callBlocks = new Map<number, number>();
  let text: number | undefined;
  const start = (id: string, model: string) => {
    if (started) return "";
    started = true;
    return event("message_start", { message: { ...frame(id, model), content: [], stop_reason: null, usage: usageOf(0, 0) } });
  };
  const close = () => {
    if (open === undefined) return "";
    const stop = event("content_block_stop", { index: open });
    open = undefined;
    return stop;
  };
  const opening = (block: Record<string, unknown>) => {
    const closed = close();
    open = blocks++;
    return `${closed}${event("content_block_start", { index: open, content_block: block })}`;
  };
  return {
    delta(id, model, delta) {
      let out = start(id, model);
      if (text === undefined || open !== text) {
        out += opening(textBlock(""));
        text = open;
      }
      return `${out}${event("content_block_delta", { index: text, delta: { type: "text_delta", text: delta } })}`;
    },
    toolCall(id, model, part) {
      let out = start(id, model);
      if (!callBlocks.has(part.index)) {
        out += opening(toolUseBlock(part.id ?? `call_${part.index}`, part.name ?? "", {}));
        callBlocks.set(part.index, open!);
      }
      const index = callBlocks.get(part.index)!;
      return part.arguments ? `${out}${event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: part.arguments } })}` : out;
    },
    done(a) {
      let out = start(a.id, a.model);
      // An answer with no text and no call still has its (empty) text block, as when not streamed.
      if (blocks === 0) out += opening(textBlock(""));
      out += close();
      const usage = usageOf(a.promptTokens, a.completionTokens);
      const delta = { stop_reason: stopReasonOf(a), stop_sequence: null, stop_details: null, container: null };
      return `${out}${event("message_delta", { delta, usage })}${event("message_stop", {})}`;
    },
    error(f: PublicFailure) {
      const { body } = anthropicError(ErrorCodes[f.code], f.message, inMessagesTerms(f.details));
      return event("error", { error: body.error });
    },
  };
}
