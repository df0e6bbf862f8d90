/**
 * Tool calls and structured output as the provider stand-ins speak them. Ollama: `tools` and
 * `format` in the request, tool calls with arguments as objects and no ids (whole, in one NDJSON
 * chunk), history arguments that must be objects (Go's decoder refuses a string), and a model
 * without tool support answering 400 "… does not support tools". OpenAI: tool calls with ids and
 * arguments as JSON text (a script may make that text broken), streamed as OpenAI streams them
 * (index, id, type and name with empty arguments first, then argument fragments).
 */

/** A call the stand-in answers with: `arguments` is JSON text (OpenAI's stand-in sends it as is, even when broken). */
export type ScriptedCall = { name: string; arguments: string; id?: string };

type Body = Record<string, any>;
type Refusal = { status: number; message: string; param?: string };

const messages = (body: Body): Body[] => (Array.isArray(body.messages) ? body.messages : []);
const offersTools = (body: Body) => Array.isArray(body.tools) && body.tools.length > 0;

/** What Ollama's /api/chat refuses about tools, format and history (its real messages). */
export function ollamaRefusal(body: Body, withoutTools: ReadonlySet<string>): Refusal | undefined {
  if (offersTools(body) && withoutTools.has(body.model)) return { status: 400, message: `registry.ollama.ai/library/${body.model} does not support tools` };
  const format = body.format;
  if (format !== undefined && format !== "" && format !== "json" && (typeof format !== "object" || format === null || Array.isArray(format)))
    return { status: 400, message: 'invalid format: expected "json" or a valid JSON schema' };
  for (const m of messages(body))
    for (const call of Array.isArray(m?.tool_calls) ? m.tool_calls : [])
      if (typeof call?.function?.arguments !== "object" || call.function.arguments === null)
        return {
          status: 400,
          message: `json: cannot unmarshal ${typeof call?.function?.arguments} into Go struct field ToolCallFunction.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments`,
        };
  return undefined;
}

/** Ollama's `message.tool_calls`: arguments parsed, no id. */
export const ollamaToolCalls = (calls: ScriptedCall[]) => calls.map((c) => ({ function: { name: c.name, arguments: JSON.parse(c.arguments) } }));

/** What an OpenAI-compatible server refuses: vLLM without tool support, and malformed tool fields (OpenAI's messages). */
export function openAiRefusal(body: Body, withoutTools: ReadonlySet<string>): Refusal | undefined {
  if (offersTools(body) && withoutTools.has(body.model) && (body.tool_choice ?? "auto") === "auto")
    return { status: 400, message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set' };
  for (const [i, tool] of (Array.isArray(body.tools) ? body.tools : []).entries())
    if (tool?.type !== "function" || typeof tool.function?.name !== "string")
      return { status: 400, message: `Missing required parameter: 'tools[${i}].function'.`, param: `tools[${i}].function` };
  for (const [i, m] of messages(body).entries()) {
    if (m?.role === "tool" && typeof m.tool_call_id !== "string")
      return { status: 400, message: `Missing required parameter: 'messages[${i}].tool_call_id'.`, param: `messages[${i}].tool_call_id` };
    for (const [j, call] of (Array.isArray(m?.tool_calls) ? m.tool_calls : []).entries())
      if (typeof call?.id !== "string" || typeof call.function?.arguments !== "string")
        return { status: 400, message: `Invalid type for 'messages[${i}].tool_calls[${j}]'.`, param: `messages[${i}].tool_calls[${j}]` };
  }
  const format = body.response_format;
  if (format?.type === "json_schema" && (typeof format.json_schema?.name !== "string" || typeof format.json_schema?.schema !== "object"))
    return { status: 400, message: "Invalid value for 'response_format.json_schema'.", param: "response_format" };
  return undefined;
}

const callId = (call: ScriptedCall, i: number) => call.id ?? `call_standin${i}`;

/** OpenAI's `message.tool_calls`: ids, arguments as text. */
export const openAiToolCalls = (calls: ScriptedCall[]) =>
  calls.map((c, i) => ({ id: callId(c, i), type: "function", function: { name: c.name, arguments: c.arguments } }));

/** The deltas of OpenAI's streamed tool calls: per call a first delta (index, id, type, name, arguments ""), then fragments of about 8 characters. */
export function openAiToolDeltas(calls: ScriptedCall[]): Array<Record<string, unknown>> {
  return calls.flatMap((c, index) => {
    const first = { tool_calls: [{ index, id: callId(c, index), type: "function", function: { name: c.name, arguments: "" } }] };
    const fragments = c.arguments.match(/[\s\S]{1,8}/g) ?? [];
    return [first, ...fragments.map((arguments_) => ({ tool_calls: [{ index, function: { arguments: arguments_ } }] }))];
  });
}
