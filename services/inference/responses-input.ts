/**
 * The parts of a Responses API request (POST /v1/responses) that become the engine's chat: the
 * `input` items and `instructions` as chat messages, the flat function `tools`, `tool_choice`
 * and `text.format`, as OpenAI's API reference defines them. Pure: faults are pushed to `errors`
 * as `{ field, message }` (the field is OpenAI's `param`); what the platform cannot do (images,
 * files, reasoning items, built-in tools) is refused by name, never dropped.
 */
import type { FieldError } from "../../lib/errors";
import { fieldPath, unknownField } from "../../lib/known-fields";
import type { ChatMessage, ResponseFormat, ToolCall, ToolChoice, ToolSpec } from "./providers";

const MAX_ITEMS = 4096;
const MAX_TOOLS = 128;
/** OpenAI's rule for function and schema names. */
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

type Item = Record<string, unknown>;
const isObject = (v: unknown): v is Item => typeof v === "object" && v !== null && !Array.isArray(v);
const isName = (v: unknown): v is string => typeof v === "string" && NAME.test(v);

/** Keys of `item` outside `known`, each named as a field (so no sub-field is silently dropped). */
function unknownKeys(item: Item, known: readonly string[], field: string, errors: FieldError[]): void {
  for (const key of Object.keys(item)) if (!known.includes(key)) errors.push(unknownField(fieldPath(field, key)));
}

// Besides what the platform reads: the ids and statuses of items a client sends back from an earlier
// response's output, and what the SDK's helpers add to them (`parsed`, `parsed_arguments`).
const MESSAGE_KEYS = ["type", "role", "content", "id", "status", "phase"];
const TEXT_PART_KEYS = ["type", "text", "annotations", "logprobs", "parsed"];
const CALL_KEYS = ["type", "call_id", "name", "arguments", "id", "status", "parsed_arguments"];
const CALL_OUTPUT_KEYS = ["type", "call_id", "output", "id", "status"];

/** Text content: a string, or `input_text` / `output_text` parts joined (any other part is refused by name). */
function textOf(content: unknown, field: string, errors: FieldError[]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    errors.push({ field, message: "must be a string or an array of input_text / output_text parts" });
    return "";
  }
  return content
    .map((part: unknown, i) => {
      const at = fieldPath(field, i);
      if (!isObject(part) || (part.type !== "input_text" && part.type !== "output_text") || typeof part.text !== "string") {
        const type = isObject(part) ? String(part.type) : typeof part;
        errors.push({ field: at, message: `Content parts of type "${type}" are not supported: only input_text and output_text (with text)` });
        return "";
      }
      unknownKeys(part, TEXT_PART_KEYS, at, errors);
      return part.text;
    })
    .join("");
}

function messageOf(item: Item, field: string, errors: FieldError[]): ChatMessage {
  unknownKeys(item, MESSAGE_KEYS, field, errors);
  const content = textOf(item.content, fieldPath(field, "content"), errors);
  if (item.role === "user" || item.role === "system" || item.role === "assistant") return { role: item.role, content };
  if (item.role === "developer") return { role: "system", content };
  errors.push({ field: fieldPath(field, "role"), message: 'must be "user", "system", "developer" or "assistant"' });
  return { role: "user", content };
}

function callOf(item: Item, field: string, errors: FieldError[]): ToolCall {
  unknownKeys(item, CALL_KEYS, field, errors);
  for (const key of ["call_id", "name"])
    if (typeof item[key] !== "string" || item[key] === "") errors.push({ field: fieldPath(field, key), message: "must be a non-empty string" });
  if (typeof item.arguments !== "string") errors.push({ field: fieldPath(field, "arguments"), message: "must be the JSON text of the arguments" });
  return { id: String(item.call_id), name: String(item.name), arguments: String(item.arguments) };
}

/** A call's result: `call_id` must name a function_call earlier in the input (the providers need the call it answers). */
function callOutputOf(item: Item, field: string, calls: ReadonlySet<string>, errors: FieldError[]): ChatMessage {
  unknownKeys(item, CALL_OUTPUT_KEYS, field, errors);
  if (typeof item.call_id !== "string" || !calls.has(item.call_id))
    errors.push({ field: fieldPath(field, "call_id"), message: "must be the call_id of a function_call earlier in the input" });
  return { role: "tool", toolCallId: String(item.call_id), content: textOf(item.output, fieldPath(field, "output"), errors) };
}

/** Adds one input item to the chat: function calls join the assistant message before them (one turn's output). */
function addItem(messages: ChatMessage[], raw: unknown, field: string, errors: FieldError[]): void {
  const item = isObject(raw) ? raw : {};
  if (isObject(raw) && (raw.type === undefined || raw.type === "message")) return void messages.push(messageOf(item, field, errors));
  if (item.type === "function_call") {
    const call = callOf(item, field, errors);
    const last = messages[messages.length - 1];
    if (last?.role === "assistant") last.toolCalls = [...(last.toolCalls ?? []), call];
    else messages.push({ role: "assistant", content: "", toolCalls: [call] });
    return;
  }
  if (item.type === "function_call_output") {
    const calls = new Set(messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [])));
    return void messages.push(callOutputOf(item, field, calls, errors));
  }
  const type = isObject(raw) ? String(raw.type) : typeof raw;
  errors.push({ field, message: `Input items of type "${type}" are not supported: only messages, function_call and function_call_output` });
}

/** `instructions` (a system message first), then `input`: a string (one user message) or a list of items. */
export function inputMessages(input: unknown, instructions: string | undefined, errors: FieldError[]): ChatMessage[] {
  const messages: ChatMessage[] = instructions ? [{ role: "system", content: instructions }] : [];
  if (typeof input === "string") return [...messages, { role: "user", content: input }];
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_ITEMS) {
    errors.push({ field: "input", message: `must be a string or a list of 1 to ${MAX_ITEMS} input items` });
    return messages;
  }
  input.forEach((item, i) => addItem(messages, item, fieldPath("input", i), errors));
  return messages;
}

const FUNCTION_TOOL_KEYS = ["type", "name", "description", "parameters", "strict"];

function toolOf(raw: unknown, field: string, errors: FieldError[]): ToolSpec | undefined {
  if (!isObject(raw) || raw.type !== "function") {
    const type = isObject(raw) ? String(raw.type) : typeof raw;
    errors.push({ field: fieldPath(field, "type"), message: `Tools of type "${type}" are not supported: only function tools (no built-in tools)` });
    return undefined;
  }
  unknownKeys(raw, FUNCTION_TOOL_KEYS, field, errors);
  if (!isName(raw.name)) errors.push({ field: fieldPath(field, "name"), message: "must be 1 to 64 letters, digits, _ or -" });
  const { description, parameters, strict } = raw;
  if (description != null && typeof description !== "string") errors.push({ field: fieldPath(field, "description"), message: "must be a string" });
  if (parameters != null && !isObject(parameters)) errors.push({ field: fieldPath(field, "parameters"), message: "must be a JSON Schema object" });
  if (strict != null && typeof strict !== "boolean") errors.push({ field: fieldPath(field, "strict"), message: "must be a boolean" });
  return {
    name: String(raw.name),
    ...(typeof description === "string" ? { description } : {}),
    ...(isObject(parameters) ? { parameters } : {}),
    ...(typeof strict === "boolean" ? { strict } : {}),
  };
}

/** Function tools in the Responses API's flat shape; an empty list is none. */
export function toolsOf(raw: unknown, errors: FieldError[]): ToolSpec[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw) || raw.length > MAX_TOOLS) {
    errors.push({ field: "tools", message: `must be a list of at most ${MAX_TOOLS} function tools` });
    return undefined;
  }
  const tools = raw.map((t, i) => toolOf(t, fieldPath("tools", i), errors)).filter((t): t is ToolSpec => t !== undefined);
  return tools.length ? tools : undefined;
}

/** "none", "auto", "required", or `{ type: "function", name }` naming one of the tools offered. */
export function toolChoiceOf(raw: unknown, tools: ToolSpec[] | undefined, errors: FieldError[]): ToolChoice | undefined {
  if (raw === undefined || raw === null || raw === "auto" || raw === "none") return raw ?? undefined;
  const named = isObject(raw) && raw.type === "function" && Object.keys(raw).every((k) => k === "type" || k === "name") ? raw.name : undefined;
  if (raw !== "required" && named === undefined) {
    errors.push({ field: "tool_choice", message: 'must be "none", "auto", "required" or {"type": "function", "name"} (no built-in or allowed_tools choices)' });
    return undefined;
  }
  if (!tools?.length || (named !== undefined && !tools.some((t) => t.name === named)))
    errors.push({ field: "tool_choice", message: named === undefined ? "requires tools" : `names no function tool of this request: ${String(named)}` });
  return named === undefined ? "required" : { name: String(named) };
}

const SCHEMA_FORMAT_KEYS = ["type", "name", "schema", "strict", "description"];

/** `text.format`: text (the default: none), `json_object`, or `json_schema` with its name and schema. */
export function textFormatOf(raw: unknown, errors: FieldError[]): ResponseFormat | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) {
    errors.push({ field: "text", message: "must be an object" });
    return undefined;
  }
  unknownKeys(raw, ["format", "verbosity"], "text", errors);
  const format = raw.format;
  if (format === undefined || format === null) return undefined;
  const type = isObject(format) ? format.type : undefined;
  if (type === "text" || type === "json_object") {
    unknownKeys(format as Item, ["type"], "text.format", errors);
    return type === "json_object" ? { type } : undefined;
  }
  if (type !== "json_schema") {
    errors.push({ field: "text.format", message: 'must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "name", "schema"}' });
    return undefined;
  }
  const f = format as Item;
  unknownKeys(f, SCHEMA_FORMAT_KEYS, "text.format", errors);
  if (!isName(f.name)) errors.push({ field: "text.format.name", message: "must be 1 to 64 letters, digits, _ or -" });
  if (!isObject(f.schema)) errors.push({ field: "text.format.schema", message: "must be a JSON Schema object" });
  if (f.strict != null && typeof f.strict !== "boolean") errors.push({ field: "text.format.strict", message: "must be a boolean" });
  if (f.description != null && typeof f.description !== "string") errors.push({ field: "text.format.description", message: "must be a string" });
  return {
    type,
    name: String(f.name),
    ...(typeof f.description === "string" ? { description: f.description } : {}),
    schema: isObject(f.schema) ? f.schema : {},
    ...(typeof f.strict === "boolean" ? { strict: f.strict } : {}),
  };
}
