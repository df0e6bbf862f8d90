/**
 * Tools and structured output on the OpenAI-compatible wire: the request's fields passed through
 * in OpenAI's shape (tools, tool_choice, parallel_tool_calls, response_format, history tool calls
 * and tool results), and the answer's tool calls read back, whole or as streamed deltas (the first
 * delta of a call carries its index, id and name, argument fragments follow); arguments are
 * checked to be JSON once whole.
 */
import { checkArguments, newCallId } from "./tool-calls";
import { ChatMessage, ChatRequest, ProviderFailure, ToolCall, ToolCallDelta } from "./types";

type WireCall = { index?: unknown; id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } };

const malformedCalls = () => new ProviderFailure("error", "Model provider returned malformed tool calls");
const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);

function wireMessage(m: ChatMessage) {
  if (m.role === "tool") return { role: m.role, content: m.content, tool_call_id: m.toolCallId };
  if (m.role === "assistant" && m.toolCalls?.length) {
    const calls = m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
    return { role: m.role, content: m.content || null, tool_calls: calls };
  }
  return { role: m.role, content: m.content };
}

/** The request's messages, and its tool and format fields as OpenAI's API names them (absent ones left out). */
export function openAiChatFields(request: ChatRequest) {
  const { tools, toolChoice, parallelToolCalls, responseFormat: format } = request;
  return {
    messages: request.messages.map(wireMessage),
    ...(tools?.length
      ? { tools: tools.map(({ name, description, parameters, strict }) => ({ type: "function", function: { name, description, parameters, strict } })) }
      : {}),
    ...(toolChoice !== undefined
      ? { tool_choice: typeof toolChoice === "string" ? toolChoice : { type: "function", function: { name: toolChoice.name } } }
      : {}),
    ...(parallelToolCalls !== undefined ? { parallel_tool_calls: parallelToolCalls } : {}),
    ...(format?.type === "json_object" ? { response_format: { type: "json_object" } } : {}),
    ...(format?.type === "json_schema"
      ? {
          response_format: {
            type: "json_schema",
            json_schema: { name: format.name, description: format.description, schema: format.schema, strict: format.strict },
          },
        }
      : {}),
  };
}

/** A whole answer's `message.tool_calls`: ids given where the provider gave none, arguments checked. */
export function toolCallsOf(raw: unknown): ToolCall[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw malformedCalls();
  return (raw as WireCall[]).map((call) => {
    const name = str(call?.function?.name);
    const args = call?.function?.arguments ?? "";
    if (!name || typeof args !== "string" || (call.type !== undefined && call.type !== "function")) throw malformedCalls();
    return { id: str(call.id) ?? newCallId(), name, arguments: checkArguments({ name, arguments: args }) };
  });
}

/** A stream's `delta.tool_calls` as parts, each call's fragments joined so its arguments are checked once whole. */
export class StreamedToolCalls {
  private readonly calls: Array<{ name: string; arguments: string }> = [];

  get count(): number {
    return this.calls.filter(Boolean).length;
  }

  parts(raw: unknown): ToolCallDelta[] {
    if (raw === undefined || raw === null) return [];
    if (!Array.isArray(raw)) throw malformedCalls();
    return (raw as WireCall[]).map((delta) => {
      const index = Number.isInteger(delta?.index) && (delta.index as number) >= 0 ? (delta.index as number) : 0;
      const args = delta?.function?.arguments ?? "";
      if (typeof args !== "string") throw malformedCalls();
      const known = this.calls[index];
      if (known) {
        known.arguments += args;
        return { index, arguments: args };
      }
      const name = str(delta?.function?.name);
      if (!name) throw malformedCalls();
      this.calls[index] = { name, arguments: args };
      return { index, id: str(delta.id) ?? newCallId(), name, arguments: args };
    });
  }

  /** At the end of the stream: every call's arguments are JSON, or the stream fails. */
  check(): void {
    for (const call of this.calls) if (call) checkArguments(call);
  }
}
