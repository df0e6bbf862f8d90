/**
 * Anthropic's Messages API requests (POST /v1/messages), as the official `@anthropic-ai/sdk`
 * client sends them, translated to the engine's chat: `system`, `messages` of text, `tool_use`
 * and `tool_result` blocks, `stop_sequences`, sampling and `metadata` here; `tools`,
 * `tool_choice` and `output_config` in anthropic-tools.ts.
 * Pure: bad input is a list of `{ field, message }`; what the platform cannot do (thinking,
 * images, documents, server tools, containers, MCP servers…) is refused by name, never dropped,
 * and so is a field the Messages API does not have. The answers: anthropic-answers.ts.
 */
import { validationFailed } from "../../lib/errors";
import { fieldPath, unknownFieldsOf } from "../../lib/known-fields";
import { Body, emptyList, Faults, given, isObject, never, Off } from "./anthropic-faults";
import { outputFormatOf, toolChoiceOf, toolsOf } from "./anthropic-tools";
import type { ChatParams } from "./engine";
import type { ChatMessage, ToolCall } from "./providers";

export type MessagesRequest = ChatParams & { maxTokens: number; stream: boolean };

/** Fields Anthropic's clients send that the platform accepts and does not apply (prompt caching, capacity tier; docs/inference.md). */
export const MESSAGES_IGNORED_FIELDS = ["cache_control", "service_tier"] as const;

const MAX_MODEL = 256;
const MAX_MESSAGES = 100_000;
const MAX_STOPS = 16;

/** Fields of the Messages API that ask for what the platform does not do, unless they hold their "off" value. */
const UNSUPPORTED: Array<[field: string, isOff: Off, what: string]> = [
  ["thinking", (v) => isObject(v) && v.type === "disabled", "Extended thinking is not supported"],
  ["top_k", never, "top_k is not supported"],
  ["container", never, "Containers (code execution) are not supported"],
  ["mcp_servers", emptyList, "MCP servers are not supported"],
  ["context_management", never, "Context management is not supported"],
  ["inference_geo", never, "inference_geo is not supported"],
  ["speed", (v) => v === "standard", 'Only the "standard" speed is supported'],
  ["diagnostics", never, "diagnostics is not supported"],
  ["user_profile_id", never, "User profiles are not supported"],
  ["workspace_id", never, "Workspaces are not supported"],
];
const READ = [
  "model",
  "messages",
  "max_tokens",
  "system",
  "tools",
  "tool_choice",
  "output_config",
  "stop_sequences",
  "temperature",
  "top_p",
  "metadata",
  "stream",
];
const MESSAGES_FIELDS: ReadonlySet<string> = new Set([...READ, ...UNSUPPORTED.map(([field]) => field), ...MESSAGES_IGNORED_FIELDS]);

/** A number in [min, max] (an integer if asked), or undefined when absent or refused. */
function numberOf(body: Body, field: string, [min, max]: [number, number], faults: Faults, integer = false): number | undefined {
  const v = body[field];
  if (!given(v)) return undefined;
  const fits = typeof v === "number" && Number.isFinite(v) && v >= min && v <= max && (!integer || Number.isInteger(v));
  if (!fits) faults.add(field, `must be ${integer ? "an integer" : "a number"} from ${min} to ${max}`);
  return fits ? (v as number) : undefined;
}

const TEXT_OFF = { citations: [emptyList, "Citations are not supported"] as [Off, string] };

/** A text block's text (`cache_control` ignored). */
function textOf(block: Body, path: string, faults: Faults): string {
  faults.keys(block, path, ["type", "text", "cache_control"], TEXT_OFF);
  if (typeof block.text === "string") return block.text;
  faults.add(fieldPath(path, "text"), "must be a string");
  return "";
}

/** A string, or text blocks joined (the system prompt, a tool result's content). */
function plainText(content: unknown, path: string, faults: Faults): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    faults.add(path, "must be a string or a list of text blocks");
    return "";
  }
  return content
    .map((block, i) => {
      const at = fieldPath(path, i);
      if (isObject(block) && block.type === "text") return textOf(block, at, faults);
      faults.add(at, `Content blocks of type "${String(isObject(block) ? block.type : block)}" are not supported here: only "text"`);
      return "";
    })
    .join("");
}

function toolUseOf(block: Body, path: string, faults: Faults): ToolCall {
  faults.keys(block, path, ["type", "id", "name", "input", "cache_control"], {
    caller: [(v) => isObject(v) && v.type === "direct", "Only direct tool callers are supported"],
    toolset_name: [never, "Toolsets are not supported"],
  });
  if (typeof block.id !== "string" || !block.id) faults.add(fieldPath(path, "id"), "must be the tool call's id");
  if (typeof block.name !== "string" || !block.name) faults.add(fieldPath(path, "name"), "must be the tool's name");
  if (!isObject(block.input)) faults.add(fieldPath(path, "input"), "must be an object");
  return { id: String(block.id), name: String(block.name), arguments: JSON.stringify(block.input ?? {}) };
}

/** A tool's result, as a `tool` message (an error result says so in its text: chat APIs have no flag for it). */
function toolResultOf(block: Body, path: string, faults: Faults, called: ReadonlySet<string>): ChatMessage {
  faults.keys(block, path, ["type", "tool_use_id", "content", "is_error", "cache_control"], { toolset_name: [never, "Toolsets are not supported"] });
  if (typeof block.tool_use_id !== "string" || !called.has(block.tool_use_id))
    faults.add(fieldPath(path, "tool_use_id"), "must be the id of a tool_use block of an earlier assistant message");
  if (given(block.is_error) && typeof block.is_error !== "boolean") faults.add(fieldPath(path, "is_error"), "must be a boolean");
  const text = given(block.content) ? plainText(block.content, fieldPath(path, "content"), faults) : "";
  return { role: "tool", toolCallId: String(block.tool_use_id), content: block.is_error === true ? `Error: ${text}` : text };
}

/**
 * One message as chat messages: a user turn's tool results first (each a `tool` message, as chat
 * APIs want them right after the assistant's calls), then its text; an assistant turn's text with
 * its tool calls.
 */
function turnOf(raw: unknown, path: string, faults: Faults, called: Set<string>): ChatMessage[] {
  if (!isObject(raw)) {
    faults.add(path, "must be an object with a role and content");
    return [];
  }
  faults.keys(raw, path, ["role", "content"]);
  const { role, content } = raw;
  if (role !== "user" && role !== "assistant" && role !== "system") {
    faults.add(fieldPath(path, "role"), 'must be "user", "assistant" or "system"');
    return [];
  }
  const at = fieldPath(path, "content");
  if (role === "system") return [{ role, content: plainText(content, at, faults) }];
  if (typeof content === "string") return [{ role, content }];
  if (!Array.isArray(content) || content.length === 0) {
    faults.add(at, "must be a string or a non-empty list of content blocks");
    return [];
  }
  let text = "";
  const calls: ToolCall[] = [];
  const results: ChatMessage[] = [];
  content.forEach((block, i) => {
    const where = fieldPath(at, i);
    const type = isObject(block) ? block.type : undefined;
    if (type === "text") text += textOf(block as Body, where, faults);
    else if (type === "tool_use" && role === "assistant") calls.push(toolUseOf(block as Body, where, faults));
    else if (type === "tool_result" && role === "user") results.push(toolResultOf(block as Body, where, faults, called));
    else if (type === "tool_use" || type === "tool_result")
      faults.add(where, `A ${type} block belongs in ${type === "tool_use" ? "an assistant" : "a user"} message`);
    else faults.add(where, `Content blocks of type "${String(type)}" are not supported: only "text", "tool_use" and "tool_result"`);
  });
  calls.forEach((c) => called.add(c.id));
  if (role === "assistant") return [{ role, content: text, ...(calls.length ? { toolCalls: calls } : {}) }];
  return text || !results.length ? [...results, { role, content: text }] : results;
}

function messagesOf(raw: unknown, faults: Faults): ChatMessage[] {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_MESSAGES) {
    faults.add("messages", `must be a list of 1 to ${MAX_MESSAGES} messages`);
    return [];
  }
  const called = new Set<string>();
  return raw.flatMap((m, i) => turnOf(m, `messages[${i}]`, faults, called));
}

function stopOf(raw: unknown, faults: Faults): string[] | undefined {
  if (!given(raw)) return undefined;
  if (Array.isArray(raw) && raw.length <= MAX_STOPS && raw.every((s) => typeof s === "string" && s !== "")) return raw.length ? (raw as string[]) : undefined;
  faults.add("stop_sequences", `must be a list of up to ${MAX_STOPS} non-empty strings`);
  return undefined;
}

function userOf(raw: unknown, faults: Faults): string | undefined {
  if (!given(raw)) return undefined;
  if (!isObject(raw)) {
    faults.add("metadata", "must be an object");
    return undefined;
  }
  faults.keys(raw, "metadata", ["user_id"]);
  const id = raw.user_id;
  if (given(id) && !(typeof id === "string" && id.length <= 256)) faults.add("metadata.user_id", "must be a string of at most 256 characters");
  return typeof id === "string" && id ? id : undefined;
}

/** The request as the engine's chat, or 400 VALIDATION_FAILED listing every fault (unknown fields first). */
export function parseMessages(raw: unknown): MessagesRequest {
  if (!isObject(raw)) throw validationFailed([{ field: "(body)", message: "must be a JSON object" }]);
  const body = raw;
  const faults = new Faults();
  faults.list.push(...unknownFieldsOf(body, MESSAGES_FIELDS));
  const model = typeof body.model === "string" ? body.model.trim() : "";
  if (!model || model.length > MAX_MODEL) faults.add("model", `must be a model name (1 to ${MAX_MODEL} characters)`);
  const system = given(body.system) ? plainText(body.system, "system", faults) : "";
  const messages = messagesOf(body.messages, faults);
  if (!given(body.max_tokens)) faults.add("max_tokens", "is required");
  const maxTokens = numberOf(body, "max_tokens", [1, 1_000_000], faults, true) ?? 0;
  const temperature = numberOf(body, "temperature", [0, 1], faults);
  const topP = numberOf(body, "top_p", [0, 1], faults);
  const stop = stopOf(body.stop_sequences, faults);
  const tools = toolsOf(body.tools, faults);
  const choice = toolChoiceOf(body.tool_choice, tools, faults);
  const responseFormat = outputFormatOf(body.output_config, faults);
  const user = userOf(body.metadata, faults);
  for (const [field, isOff, what] of UNSUPPORTED) if (given(body[field]) && !isOff(body[field])) faults.add(field, what);
  if (given(body.stream) && typeof body.stream !== "boolean") faults.add("stream", "must be a boolean");
  if (faults.list.length) throw validationFailed(faults.list);
  return {
    model,
    messages: system ? [{ role: "system", content: system }, ...messages] : messages,
    maxTokens,
    temperature,
    topP,
    stop,
    user,
    // Without tools, "auto" and "none" both mean no calls ("any" and "tool" were refused).
    ...(tools?.length ? { tools, ...choice } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    stream: body.stream === true,
  };
}
