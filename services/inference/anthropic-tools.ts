/**
 * The Messages API's tool and output fields, translated to the engine's chat: custom `tools`
 * (server tools refused by name), `tool_choice`, and `output_config.format` (JSON matching a
 * schema); and the chat's field names in a provider's refusal, as the Messages API names them.
 * Pure, like anthropic-api.ts which uses it.
 */
import { emptyList, Faults, given, isObject, never, Off } from "./anthropic-faults";
import type { ChatParams } from "./engine";
import type { ResponseFormat, ToolChoice, ToolSpec } from "./providers";

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const TOOL_OFF: Record<string, [Off, string]> = {
  type: [(v) => v === "custom", "Server tools (bash, text editor, web search, code execution…) are not supported: only custom tools"],
  defer_loading: [(v) => v === false, "defer_loading is not supported"],
  input_examples: [emptyList, "input_examples is not supported"],
  allowed_callers: [(v) => Array.isArray(v) && v.every((c) => c === "direct"), "Only direct tool callers are supported"],
  eager_input_streaming: [(v) => v === false, "eager_input_streaming is not supported"],
};

export function toolsOf(raw: unknown, faults: Faults): ToolSpec[] | undefined {
  if (!given(raw)) return undefined;
  if (!Array.isArray(raw)) {
    faults.add("tools", "must be a list of tools");
    return undefined;
  }
  const names = raw.map((tool) => (isObject(tool) ? tool.name : undefined));
  if (new Set(names).size !== names.length) faults.add("tools", "tool names must be unique");
  return raw.map((tool, i) => {
    const path = `tools[${i}]`;
    if (!isObject(tool)) {
      faults.add(path, "must be a tool object");
      return { name: "" };
    }
    faults.keys(tool, path, ["name", "description", "input_schema", "strict", "cache_control"], TOOL_OFF);
    if (typeof tool.name !== "string" || !TOOL_NAME.test(tool.name)) faults.add(`${path}.name`, "must be 1 to 64 letters, digits, _ or -");
    if (given(tool.description) && typeof tool.description !== "string") faults.add(`${path}.description`, "must be a string");
    if (!isObject(tool.input_schema) || tool.input_schema.type !== "object") faults.add(`${path}.input_schema`, 'must be a JSON Schema of type "object"');
    if (given(tool.strict) && typeof tool.strict !== "boolean") faults.add(`${path}.strict`, "must be a boolean");
    const spec: ToolSpec = { name: String(tool.name), parameters: tool.input_schema as Record<string, unknown> };
    if (typeof tool.description === "string") spec.description = tool.description;
    if (typeof tool.strict === "boolean") spec.strict = tool.strict;
    return spec;
  });
}

const CHOICES: Readonly<Record<string, ToolChoice>> = { auto: "auto", any: "required", none: "none" };

/** `tool_choice` → the chat's choice, and whether calls may come in parallel. */
export function toolChoiceOf(raw: unknown, tools: ToolSpec[] | undefined, faults: Faults): Pick<ChatParams, "toolChoice" | "parallelToolCalls"> {
  if (!given(raw)) return {};
  if (!isObject(raw) || (raw.type !== "tool" && !Object.hasOwn(CHOICES, String(raw.type)))) {
    faults.add("tool_choice", 'must be {"type": "auto" | "any" | "tool" | "none"}');
    return {};
  }
  faults.keys(
    raw,
    "tool_choice",
    raw.type === "none" ? ["type"] : raw.type === "tool" ? ["type", "name", "disable_parallel_tool_use"] : ["type", "disable_parallel_tool_use"],
  );
  const { type, name, disable_parallel_tool_use: serial } = raw;
  if (given(serial) && typeof serial !== "boolean") faults.add("tool_choice.disable_parallel_tool_use", "must be a boolean");
  if (type === "tool" && !tools?.some((t) => t.name === name)) faults.add("tool_choice.name", "must name one of the request's tools");
  else if (type !== "none" && type !== "auto" && !tools?.length) faults.add("tool_choice", `"${String(type)}" needs tools`);
  return { toolChoice: type === "tool" ? { name: String(name) } : CHOICES[String(type)], ...(serial === true ? { parallelToolCalls: false } : {}) };
}

/** `output_config`: `format` `{"type": "json_schema", "schema"}` is structured output; `effort` is refused. */
export function outputFormatOf(raw: unknown, faults: Faults): ResponseFormat | undefined {
  if (!given(raw)) return undefined;
  if (!isObject(raw)) {
    faults.add("output_config", "must be an object");
    return undefined;
  }
  faults.keys(raw, "output_config", ["format"], { effort: [never, "effort is not supported"] });
  const format = raw.format;
  if (!given(format)) return undefined;
  if (isObject(format) && format.type === "json_schema" && isObject(format.schema)) {
    faults.keys(format, "output_config.format", ["type", "schema"]);
    return { type: "json_schema", name: "output", schema: format.schema };
  }
  faults.add("output_config.format", 'must be {"type": "json_schema", "schema": <a JSON Schema object>}');
  return undefined;
}

/** The chat's field names (OpenAI's: a provider's refusal names them so) that the Messages API names otherwise. */
const MESSAGES_NAMES: Readonly<Record<string, string>> = { parallel_tool_calls: "tool_choice.disable_parallel_tool_use", response_format: "output_config" };

/** A refusal's `{ field, message }` list, each field and its mention in the message as the Messages API names it. */
export function inMessagesTerms(details: unknown): unknown {
  if (!Array.isArray(details)) return details;
  return details.map((d: { field?: unknown; message?: unknown }) => {
    const name = typeof d?.field === "string" && Object.hasOwn(MESSAGES_NAMES, d.field) ? MESSAGES_NAMES[d.field] : undefined;
    return name ? { ...d, field: name, message: String(d.message).replaceAll(`\`${String(d.field)}\``, `\`${name}\``) } : d;
  });
}
