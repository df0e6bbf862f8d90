/**
 * A streamed Responses API answer: the engine's deltas and tool-call parts written as OpenAI's
 * `response.*` server-sent events (`event: <type>` and `data: {type, sequence_number, …}`), in the
 * order the official client's ResponseStream accumulates them: created, in_progress; per output
 * item added → its deltas → done; then completed (or incomplete, cut at max_output_tokens) with
 * the whole response and its usage. A failure is `response.failed` then an `error` event, which
 * the client throws.
 */
import { ErrorCodes } from "../../lib/errors";
import { openAiError } from "../../lib/openai-errors";
import type { Answer, StreamFormat } from "./answers";
import type { PublicFailure } from "./errors";
import type { ToolCallDelta } from "./providers";
import { functionCallId, functionCallItem, ItemStatus, messageId, messageItem, outputText, ResponsesRequest, responseOf, responseShell } from "./responses-api";

/** The output item being written: the text message, or function call `n` (the provider's call `index`). */
type Open =
  | { kind: "message"; outputIndex: number; text: string }
  | { kind: "call"; outputIndex: number; n: number; index: number; callId: string; name: string; args: string };

export function responsesStreamFormat(request: ResponsesRequest, createdAt: number): StreamFormat {
  let sequence = 0;
  /** The inference that response.created announced. */
  let begun: { id: string; model: string } | undefined;
  let outputs = 0;
  let calls = 0;
  let open: Open | undefined;
  const seen = new Set<number>();

  const event = (type: string, fields: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`;

  /** response.created and response.in_progress, before the first event of any other kind. */
  const start = (id: string, model: string) => {
    if (begun) return "";
    begun = { id, model };
    const response = responseShell(id, model, request, createdAt);
    return event("response.created", { response }) + event("response.in_progress", { response });
  };

  const openMessage = (id: string) => {
    open = { kind: "message", outputIndex: outputs++, text: "" };
    const at = { item_id: messageId(id), output_index: open.outputIndex };
    return (
      event("response.output_item.added", { output_index: open.outputIndex, item: messageItem(id, "in_progress") }) +
      event("response.content_part.added", { ...at, content_index: 0, part: outputText("") })
    );
  };

  /** The done events of the item being written (none open: nothing). */
  const close = (id: string, status: ItemStatus = "completed") => {
    const item = open;
    open = undefined;
    if (!item) return "";
    if (item.kind === "message") {
      const at = { item_id: messageId(id), output_index: item.outputIndex, content_index: 0 };
      return (
        event("response.output_text.done", { ...at, text: item.text, logprobs: [] }) +
        event("response.content_part.done", { ...at, part: outputText(item.text) }) +
        event("response.output_item.done", { output_index: item.outputIndex, item: messageItem(id, status, item.text) })
      );
    }
    const done = functionCallItem(id, item.n, { id: item.callId, name: item.name, arguments: item.args }, "completed");
    return (
      event("response.function_call_arguments.done", { item_id: done.id, output_index: item.outputIndex, name: item.name, arguments: item.args }) +
      event("response.output_item.done", { output_index: item.outputIndex, item: done })
    );
  };

  const openCall = (id: string, part: ToolCallDelta) => {
    const call: Open = { kind: "call", outputIndex: outputs++, n: calls++, index: part.index, callId: part.id ?? "", name: part.name ?? "", args: "" };
    open = call;
    seen.add(part.index);
    const item = functionCallItem(id, call.n, { id: call.callId, name: call.name, arguments: "" }, "in_progress");
    return event("response.output_item.added", { output_index: call.outputIndex, item });
  };

  return {
    delta(id, model, text) {
      // An empty delta opens no message (a provider may send one before its tool calls).
      if (!text) return start(id, model);
      let out = start(id, model);
      if (open?.kind !== "message") out += close(id) + openMessage(id);
      const message = open as Extract<Open, { kind: "message" }>;
      message.text += text;
      return (
        out +
        event("response.output_text.delta", {
          item_id: messageId(id),
          output_index: message.outputIndex,
          content_index: 0,
          delta: text,
          logprobs: [],
        })
      );
    },

    toolCall(id, model, part) {
      let out = start(id, model);
      const current = open?.kind === "call" && open.index === part.index ? open : undefined;
      // Providers send calls one after another; a part of a call already closed is in the completed response only.
      if (!current && seen.has(part.index)) return out;
      let call = current;
      if (!call) {
        out += close(id) + openCall(id, part);
        call = open as Extract<Open, { kind: "call" }>;
      }
      if (!part.arguments) return out;
      call.args += part.arguments;
      return (
        out + event("response.function_call_arguments.delta", { item_id: functionCallId(id, call.n), output_index: call.outputIndex, delta: part.arguments })
      );
    },

    done(a: Answer) {
      const cut = a.finishReason === "length";
      let out = start(a.id, a.model);
      // An answer with neither text nor tool calls is still one (empty) message, as in the whole response.
      if (!outputs) out += openMessage(a.id);
      out += close(a.id, cut ? "incomplete" : "completed");
      return out + event(cut ? "response.incomplete" : "response.completed", { response: responseOf(a, request, createdAt) });
    },

    error(f: PublicFailure) {
      const { error } = openAiError(ErrorCodes[f.code], f.code, f.message, f.details);
      const fault = event("error", { code: error.code, message: error.message, param: error.param, error });
      // Failed before any event: the error alone (the client throws it before it looks for response.created).
      if (!begun) return fault;
      const failed = {
        ...responseShell(begun.id, begun.model, request, createdAt),
        status: "failed" as const,
        error: { code: "server_error", message: f.message },
      };
      return event("response.failed", { response: failed }) + fault;
    },
  };
}
