/**
 * What both adapters share about tool calls and structured output: ids for calls a provider gave
 * none, arguments checked to be JSON before they reach a client, and a provider's refusal of a
 * field (HTTP 400 naming tools or a format) turned into an "unsupported" failure naming the field.
 */
import { randomUUID } from "crypto";
import { ChatRequest, ProviderFailure, ToolCall } from "./types";

/** An id in OpenAI's style for a call its provider gave none. */
export const newCallId = (): string => `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`;

export const unsupported = (param: string, message: string) => new ProviderFailure("unsupported", message, 400, param);

const badArguments = (name: string) => new ProviderFailure("error", `Model provider returned arguments for tool "${name}" that are not valid JSON`);

/** The whole arguments of a call, or the provider's failure when they are not JSON (never passed on broken). */
export function checkArguments(call: Pick<ToolCall, "name" | "arguments">): string {
  try {
    JSON.parse(call.arguments);
  } catch {
    throw badArguments(call.name);
  }
  return call.arguments;
}

/** A call's arguments as the object Ollama's API carries (the history's arguments were checked as JSON when parsed). */
export function argumentsObject(call: ToolCall): unknown {
  try {
    return JSON.parse(call.arguments);
  } catch {
    throw unsupported("messages", `The arguments of tool call "${call.id}" are not valid JSON`);
  }
}

/**
 * The field a provider's 400 refused, when the request used tools or structured output and the
 * provider's message is about them (a field the request did not send is never named: vLLM's
 * '"auto" tool choice requires …' for tools alone names tools); otherwise it stays a 502.
 */
export function refusedField(failure: unknown, request: ChatRequest): unknown {
  if (!(failure instanceof ProviderFailure) || failure.status !== 400) return failure;
  const text = failure.message;
  const usesTools = !!request.tools?.length;
  let param: string | undefined;
  if (request.responseFormat && /response_format|json_schema|json_object|format|schema|guided/i.test(text)) param = "response_format";
  else if (usesTools && request.parallelToolCalls !== undefined && /parallel_tool_calls/i.test(text)) param = "parallel_tool_calls";
  else if (usesTools && request.toolChoice !== undefined && /tool_choice|tool choice/i.test(text)) param = "tool_choice";
  else if (usesTools && /tool|function/i.test(text)) param = "tools";
  return param ? unsupported(param, text) : failure;
}
