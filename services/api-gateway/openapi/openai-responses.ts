/**
 * POST /v1/responses, OpenAI's Responses API (node_modules/openai resources/responses), stateless,
 * in OpenAI's shapes: input items (messages, function_call, function_call_output) and
 * instructions, flat function tools, tool_choice and text.format as
 * services/inference/responses-input.ts reads them; the `response` object with its output items and
 * the request's settings echoed (responses-api.ts); the `response.*` events when streamed.
 */
import type { JsonSchema } from "./schema";
import { FUNCTION_NAME, object, sseAlternative, text, userSchema } from "./shapes";

const parts = (types: string[]): JsonSchema => ({
  type: "array",
  items: object(["type", "text"], { type: { enum: types }, text: { type: "string" } }),
});
const textContent: JsonSchema = { oneOf: [{ type: "string" }, parts(["input_text", "output_text"])] };
const itemStatus: JsonSchema = { type: "string", enum: ["in_progress", "completed", "incomplete"] };

const InputItem: JsonSchema = {
  $id: "OpenAiResponseInputItem",
  description: "A message, or a function call of an earlier turn and its output (an earlier response's output items can be sent back as they are)",
  oneOf: [
    object(["role", "content"], {
      type: { const: "message" },
      role: { enum: ["user", "system", "developer", "assistant"] },
      content: textContent,
      id: { type: "string" },
      status: itemStatus,
    }),
    object(["type", "call_id", "name", "arguments"], {
      type: { const: "function_call" },
      call_id: { type: "string", minLength: 1 },
      name: { type: "string", minLength: 1 },
      arguments: text("The JSON text of the arguments"),
      id: { type: "string" },
      status: itemStatus,
    }),
    object(["type", "call_id", "output"], {
      type: { const: "function_call_output" },
      call_id: text("The call_id of a function_call earlier in the input"),
      output: textContent,
      id: { type: "string" },
      status: itemStatus,
    }),
  ],
};

const FunctionTool = object(
  ["type", "name"],
  {
    type: { const: "function" },
    name: FUNCTION_NAME,
    description: { type: ["string", "null"] },
    parameters: { oneOf: [userSchema("The function's arguments as a JSON Schema object"), { type: "null" }] },
    strict: { type: ["boolean", "null"] },
  },
  { $id: "OpenAiResponseFunctionTool" },
);

const ToolChoice: JsonSchema = {
  oneOf: [{ type: "string", enum: ["none", "auto", "required"] }, object(["type", "name"], { type: { const: "function" }, name: { type: "string" } })],
};

const TextFormat: JsonSchema = {
  $id: "OpenAiResponseTextFormat",
  oneOf: [
    object(["type"], { type: { const: "text" } }),
    object(["type"], { type: { const: "json_object" } }),
    object(["type", "name", "schema"], {
      type: { const: "json_schema" },
      name: FUNCTION_NAME,
      schema: userSchema("The JSON Schema the answer follows"),
      description: { type: "string" },
      strict: { type: ["boolean", "null"] },
    }),
  ],
};

const metadata: JsonSchema = { type: ["object", "null"], maxProperties: 16, additionalProperties: { type: "string" } };

export const ResponseCreateRequest = object(
  ["input"],
  {
    model: text("The model (required unless `models` is given)"),
    models: { type: "array", items: { type: "string" }, description: "Fallback models, tried in order (OpenRouter's field)" },
    input: {
      oneOf: [
        { type: "string", description: "One user message" },
        { type: "array", minItems: 1, maxItems: 4096, items: InputItem },
      ],
    },
    instructions: { type: ["string", "null"], description: "A system message before the input" },
    tools: { type: "array", maxItems: 128, items: FunctionTool, description: "Function tools only (no built-in tools)" },
    tool_choice: ToolChoice,
    parallel_tool_calls: { type: ["boolean", "null"] },
    text: { type: ["object", "null"], properties: { format: TextFormat, verbosity: {} } },
    temperature: { type: ["number", "null"], minimum: 0, maximum: 2 },
    top_p: { type: ["number", "null"], minimum: 0, maximum: 1 },
    max_output_tokens: { type: ["integer", "null"], minimum: 1 },
    stream: { type: ["boolean", "null"], description: "true: server-sent `response.*` events" },
    store: { enum: [false, null], description: "The platform keeps no responses: true is refused (400)" },
    metadata,
    user: { type: ["string", "null"], maxLength: 256 },
  },
  {
    $id: "OpenAiResponseCreateRequest",
    description:
      "Stateless: send the whole conversation in `input`. store: true, previous_response_id, conversation, background, prompt templates, " +
      "reasoning summaries, include, logprobs, built-in tools and non-text content are refused by name (400), not ignored; so is a field " +
      "OpenAI's API does not have. The fields accepted and ignored: docs/errors.md.",
  },
);

const MessageItem = object(["type", "id", "status", "role", "content"], {
  type: { const: "message" },
  id: text("msg_…"),
  status: itemStatus,
  role: { const: "assistant" },
  content: {
    type: "array",
    items: object(["type", "text", "annotations"], {
      type: { const: "output_text" },
      text: { type: "string" },
      annotations: { type: "array" },
      logprobs: { type: "array" },
    }),
  },
});

const FunctionCallItem = object(["type", "id", "call_id", "name", "arguments", "status"], {
  type: { const: "function_call" },
  id: text("fc_…"),
  call_id: text("The call's id: a function_call_output answers it"),
  name: { type: "string" },
  arguments: text("The JSON text of the arguments"),
  status: itemStatus,
});

const usage = object(["input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"], {
  input_tokens: { type: "integer" },
  input_tokens_details: object(["cached_tokens"], { cached_tokens: { type: "integer" } }),
  output_tokens: { type: "integer" },
  output_tokens_details: object(["reasoning_tokens"], { reasoning_tokens: { type: "integer" } }),
  total_tokens: { type: "integer" },
});

export const ResponseObject = object(
  ["id", "object", "created_at", "status", "error", "incomplete_details", "instructions", "model", "output", "parallel_tool_calls"].concat([
    "temperature",
    "tool_choice",
    "tools",
    "top_p",
    "metadata",
    "usage",
  ]),
  {
    id: text("resp_…"),
    object: { const: "response" },
    created_at: { type: "integer", description: "Unix seconds" },
    status: { type: "string", enum: ["completed", "incomplete", "in_progress", "failed"], description: "incomplete: cut at max_output_tokens" },
    error: { oneOf: [{ type: "null" }, object(["code", "message"], { code: { type: "string" }, message: { type: "string" } })] },
    incomplete_details: { oneOf: [{ type: "null" }, object(["reason"], { reason: { const: "max_output_tokens" } })] },
    instructions: { type: ["string", "null"] },
    max_output_tokens: { type: ["integer", "null"] },
    model: { type: "string" },
    output: {
      type: "array",
      items: { oneOf: [MessageItem, FunctionCallItem] },
      description: "The text as a message (unless the answer only called tools), then each function call",
    },
    parallel_tool_calls: { type: "boolean" },
    previous_response_id: { type: "null" },
    reasoning: { type: "object" },
    store: { const: false },
    temperature: { type: ["number", "null"] },
    text: object(["format"], { format: TextFormat }),
    tool_choice: ToolChoice,
    tools: { type: "array", items: FunctionTool },
    top_p: { type: ["number", "null"] },
    truncation: { const: "disabled" },
    usage: { oneOf: [usage, { type: "null" }] },
    metadata,
    user: { type: "string" },
  },
  { $id: "OpenAiResponse" },
);

export const RESPONSE_STREAM = sseAlternative(
  "`event: <type>` and `data: {type, sequence_number, …}`: response.created, response.in_progress; per output item " +
    "response.output_item.added, its deltas (response.output_text.delta / response.function_call_arguments.delta) and .done events; " +
    "then response.completed (or response.incomplete) with the whole response. A failure is response.failed, then an `error` event.",
);
