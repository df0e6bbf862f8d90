/**
 * Tools and structured output in Ollama's own terms (POST /api/chat): `tools` as function specs,
 * `format` "json" or a JSON Schema, history tool calls with arguments as objects and tool results
 * with `tool_name`; the answer's tool calls (arguments an object; an id only from newer versions).
 * What Ollama cannot honour (forcing a call, one call at most, strict arguments) is refused by name.
 */
import { argumentsObject, checkArguments, newCallId, unsupported } from "./tool-calls";
import { ChatMessage, ChatRequest, ProviderFailure, ToolCall } from "./types";

export type OllamaToolCall = { id?: unknown; function?: { index?: unknown; name?: unknown; arguments?: unknown } };

const malformedCalls = () => new ProviderFailure("error", "Model provider returned malformed tool calls");

/** Refuses, by the field's name, what Ollama's API has no way to do (docs/inference.md "Tools and structured output"). */
function refuseUnfaithful(request: ChatRequest): void {
  if (!request.tools?.length || request.toolChoice === "none") return;
  const choice = request.toolChoice;
  if (choice === "required" || typeof choice === "object")
    throw unsupported("tool_choice", 'Ollama models cannot be made to call a tool: tool_choice may only be "auto" or "none"');
  if (request.parallelToolCalls === false)
    throw unsupported("parallel_tool_calls", "Ollama models cannot be limited to one tool call per answer (parallel_tool_calls: false)");
  if (request.tools.some((t) => t.strict))
    throw unsupported("tools", "Ollama does not hold tool call arguments to their schema: strict function tools are not supported");
}

/** The history in Ollama's terms: a tool result names its tool (found by the call's id in an earlier answer). */
function ollamaMessages(messages: ChatMessage[]) {
  const names = new Map<string, string>();
  return messages.map((m) => {
    if (m.role === "assistant" && m.toolCalls?.length) {
      for (const call of m.toolCalls) names.set(call.id, call.name);
      const toolCalls = m.toolCalls.map((call) => ({ function: { name: call.name, arguments: argumentsObject(call) } }));
      return { role: m.role, content: m.content, tool_calls: toolCalls };
    }
    if (m.role === "tool") {
      const name = names.get(m.toolCallId);
      return { role: m.role, content: m.content, ...(name ? { tool_name: name } : {}) };
    }
    return { role: m.role, content: m.content };
  });
}

/** The request's messages, tools and format fields of POST /api/chat. */
export function ollamaChatFields(request: ChatRequest) {
  refuseUnfaithful(request);
  // tool_choice "none": the model is not shown the tools, so it cannot call one.
  const tools = request.tools?.length && request.toolChoice !== "none" ? request.tools : undefined;
  const format = request.responseFormat && (request.responseFormat.type === "json_object" ? "json" : request.responseFormat.schema);
  return {
    messages: ollamaMessages(request.messages),
    ...(tools ? { tools: tools.map(({ name, description, parameters }) => ({ type: "function", function: { name, description, parameters } })) } : {}),
    ...(format ? { format } : {}),
  };
}

/** The tool calls of an answer (or of a streamed chunk), each with an id and its arguments as JSON text. */
export function toolCallsOf(raw: unknown): ToolCall[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw malformedCalls();
  return (raw as OllamaToolCall[]).map((call) => {
    const name = call?.function?.name;
    if (typeof name !== "string" || !name) throw malformedCalls();
    const args = call.function?.arguments ?? {};
    let text: string;
    if (typeof args === "string") text = checkArguments({ name, arguments: args });
    else if (typeof args === "object" && !Array.isArray(args)) text = JSON.stringify(args);
    else throw malformedCalls();
    return { id: typeof call.id === "string" && call.id ? call.id : newCallId(), name, arguments: text };
  });
}
