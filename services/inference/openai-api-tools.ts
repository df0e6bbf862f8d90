/**
 * The tool and structured-output fields of /v1/chat/completions, as OpenAI's API reference defines
 * them: `tools` (function tools), `tool_choice`, `parallel_tool_calls` and `response_format` read
 * into the engine's options; assistant `tool_calls` and `tool` messages of the history; and the
 * answer's tool calls written back, whole or as stream deltas. Pure: faults are `{ field, message }`.
 */
import type { FieldError } from "../../lib/errors";
import type { ChatMessage, ChatOptions, ResponseFormat, ToolCall, ToolCallDelta, ToolChoice, ToolSpec } from "./providers";

export type ToolFields = Pick<ChatOptions, "tools" | "toolChoice" | "parallelToolCalls" | "responseFormat">;

/** OpenAI's rule for function and schema names. */
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const NAME_RULE = "must be 1 to 64 letters, digits, underscores or dashes";
const MAX_TOOLS = 128;
const MAX_ID = 256;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const absent = (v: unknown) => v === undefined || v === null;

function functionOf(raw: unknown, field: string, errors: FieldError[]): ToolSpec | undefined {
  const tool = raw as { type?: unknown; function?: unknown };
  if (tool?.type !== "function") return void errors.push({ field: `${field}.type`, message: 'Only "function" tools are supported' });
  const f = tool.function;
  if (!isObject(f)) return void errors.push({ field: `${field}.function`, message: "must be an object" });
  const faults = errors.length;
  if (typeof f.name !== "string" || !NAME.test(f.name)) errors.push({ field: `${field}.function.name`, message: NAME_RULE });
  if (!absent(f.description) && typeof f.description !== "string") errors.push({ field: `${field}.function.description`, message: "must be a string" });
  if (!absent(f.parameters) && !isObject(f.parameters)) errors.push({ field: `${field}.function.parameters`, message: "must be a JSON Schema object" });
  if (!absent(f.strict) && typeof f.strict !== "boolean") errors.push({ field: `${field}.function.strict`, message: "must be a boolean" });
  if (errors.length > faults) return undefined;
  return {
    name: f.name as string,
    ...(typeof f.description === "string" ? { description: f.description } : {}),
    ...(isObject(f.parameters) ? { parameters: f.parameters } : {}),
    ...(typeof f.strict === "boolean" ? { strict: f.strict } : {}),
  };
}

function toolsOf(raw: unknown, errors: FieldError[]): ToolSpec[] | undefined {
  if (absent(raw)) return undefined;
  if (!Array.isArray(raw) || raw.length > MAX_TOOLS)
    return void errors.push({ field: "tools", message: `must be a list of at most ${MAX_TOOLS} function tools` });
  const tools = raw.map((t, i) => functionOf(t, `tools[${i}]`, errors)).filter((t): t is ToolSpec => t !== undefined);
  const names = tools.map((t) => t.name);
  if (new Set(names).size !== names.length) errors.push({ field: "tools", message: "function names must be unique" });
  return tools.length ? tools : undefined;
}

function toolChoiceOf(raw: unknown, tools: ToolSpec[] | undefined, errors: FieldError[]): ToolChoice | undefined {
  if (absent(raw)) return undefined;
  const fault = (message: string) => void errors.push({ field: "tool_choice", message });
  if (raw === "none" || raw === "auto" || raw === "required") {
    if (raw === "required" && !tools) return fault('"required" needs tools');
    return tools ? raw : undefined;
  }
  const named = raw as { type?: unknown; function?: { name?: unknown } };
  if (named?.type !== "function" || typeof named.function?.name !== "string")
    return fault('must be "none", "auto", "required" or {"type": "function", "function": {"name": …}}');
  const name = named.function.name;
  if (!tools?.some((t) => t.name === name)) return fault(`names function "${name.slice(0, 64)}", which is not among tools`);
  return { name };
}

function responseFormatOf(raw: unknown, errors: FieldError[]): ResponseFormat | undefined {
  if (absent(raw)) return undefined;
  const format = raw as { type?: unknown; json_schema?: unknown };
  if (format?.type === "text") return undefined;
  if (format?.type === "json_object") return { type: "json_object" };
  if (format?.type !== "json_schema") return void errors.push({ field: "response_format.type", message: 'must be "text", "json_object" or "json_schema"' });
  const spec = format.json_schema;
  const field = "response_format.json_schema";
  if (!isObject(spec)) return void errors.push({ field, message: "must be an object" });
  const faults = errors.length;
  if (typeof spec.name !== "string" || !NAME.test(spec.name)) errors.push({ field: `${field}.name`, message: NAME_RULE });
  if (!isObject(spec.schema)) errors.push({ field: `${field}.schema`, message: "must be a JSON Schema object" });
  if (!absent(spec.description) && typeof spec.description !== "string") errors.push({ field: `${field}.description`, message: "must be a string" });
  if (!absent(spec.strict) && typeof spec.strict !== "boolean") errors.push({ field: `${field}.strict`, message: "must be a boolean" });
  if (errors.length > faults) return undefined;
  return {
    type: "json_schema",
    name: spec.name as string,
    schema: spec.schema as Json,
    ...(typeof spec.description === "string" ? { description: spec.description } : {}),
    ...(typeof spec.strict === "boolean" ? { strict: spec.strict } : {}),
  };
}

/** The request's tool and format fields; tool_choice and parallel_tool_calls count only with tools. */
export function toolFieldsOf(body: Json, errors: FieldError[]): ToolFields {
  const tools = toolsOf(body.tools, errors);
  const toolChoice = toolChoiceOf(body.tool_choice, tools, errors);
  const parallel = body.parallel_tool_calls;
  if (!absent(parallel) && typeof parallel !== "boolean") errors.push({ field: "parallel_tool_calls", message: "must be a boolean" });
  const responseFormat = responseFormatOf(body.response_format, errors);
  return {
    ...(tools ? { tools } : {}),
    ...(toolChoice ? { toolChoice } : {}),
    ...(tools && typeof parallel === "boolean" ? { parallelToolCalls: parallel } : {}),
    ...(responseFormat ? { responseFormat } : {}),
  };
}

const isId = (v: unknown): v is string => typeof v === "string" && v !== "" && v.length <= MAX_ID;

function isJsonObject(text: string): boolean {
  try {
    return isObject(JSON.parse(text));
  } catch {
    return false;
  }
}

/** An assistant message's `tool_calls`: each id is remembered in `seen`, for the tool messages after it. */
export function historyCallsOf(raw: unknown, field: string, seen: Set<string>, errors: FieldError[]): ToolCall[] | undefined {
  if (absent(raw)) return undefined;
  if (!Array.isArray(raw)) return void errors.push({ field, message: "must be a list of function tool calls" });
  const calls: ToolCall[] = [];
  raw.forEach((c: { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } }, j) => {
    const args = c?.function?.arguments;
    if (!isId(c?.id) || c.type !== "function" || typeof c.function?.name !== "string" || !c.function.name || typeof args !== "string")
      return errors.push({ field: `${field}[${j}]`, message: 'must be {"id", "type": "function", "function": {"name", "arguments"}}' });
    if (!isJsonObject(args)) return errors.push({ field: `${field}[${j}].function.arguments`, message: "must be the JSON text of an object" });
    seen.add(c.id);
    calls.push({ id: c.id, name: c.function.name, arguments: args });
  });
  return calls.length ? calls : undefined;
}

/** A `tool` message: the result of a call an earlier assistant message made. */
export function toolMessageOf(toolCallId: unknown, content: string, field: string, seen: Set<string>, errors: FieldError[]): ChatMessage {
  if (!isId(toolCallId)) errors.push({ field: `${field}.tool_call_id`, message: "must be the id of a tool call" });
  else if (!seen.has(toolCallId)) errors.push({ field: `${field}.tool_call_id`, message: "must answer a tool call of an earlier assistant message" });
  return { role: "tool", content, toolCallId: String(toolCallId) };
}

/** The answer's tool calls in OpenAI's shape. */
export const wireToolCalls = (calls: ToolCall[]) => calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));

/** A part of a streamed call as OpenAI's `delta.tool_calls[]` item: index, id, type and name first, argument fragments after. */
export function toolCallDelta(part: ToolCallDelta) {
  return {
    index: part.index,
    ...(part.id ? { id: part.id, type: "function" } : {}),
    function: { ...(part.name ? { name: part.name } : {}), arguments: part.arguments },
  };
}
