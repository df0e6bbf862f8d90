/**
 * POST /v1/chat/completions in OpenAI's shapes (node_modules/openai resources/chat/completions):
 * the messages of each role (an assistant's tool calls, the tool messages answering them), function
 * tools, tool_choice and response_format as services/inference/openai-api.ts and openai-api-tools.ts
 * read them, and the completion with its tool calls and finish reason. Schemas with `$id` are
 * published once under that name.
 */
import type { JsonSchema } from "./schema";
import { FUNCTION_NAME, object, sseAlternative, text, userSchema } from "./shapes";

const textParts: JsonSchema = { type: "array", items: object(["type", "text"], { type: { const: "text" }, text: { type: "string" } }) };
const content: JsonSchema = { oneOf: [{ type: "string" }, textParts] };
const name: JsonSchema = { type: "string", description: "Accepted and ignored" };

/** A call the model asked for; `arguments` is the JSON text of an object, as the model wrote it. */
export const ToolCall = object(
  ["id", "type", "function"],
  {
    id: { type: "string", minLength: 1, maxLength: 256 },
    type: { const: "function" },
    function: object(["name", "arguments"], { name: { type: "string", minLength: 1 }, arguments: text("The JSON text of an object") }),
  },
  { $id: "OpenAiToolCall" },
);

const message = (role: JsonSchema, required: string[], more: Record<string, JsonSchema>): JsonSchema => object(["role", ...required], { role, ...more });

const Message: JsonSchema = {
  $id: "OpenAiChatMessage",
  oneOf: [
    message({ enum: ["system", "developer"] }, ["content"], { content, name }),
    message({ const: "user" }, ["content"], { content, name }),
    message({ const: "assistant" }, [], {
      content: { oneOf: [{ type: "string" }, textParts, { type: "null" }], description: "May be absent or null when the message made tool calls" },
      name,
      refusal: { type: ["string", "null"] },
      tool_calls: { type: "array", items: ToolCall },
    }),
    message({ const: "tool" }, ["content", "tool_call_id"], {
      content,
      tool_call_id: text("The id of a tool call of an earlier assistant message, which this message answers"),
    }),
  ],
};

const Tool = object(
  ["type", "function"],
  {
    type: { const: "function" },
    function: object(["name"], {
      name: FUNCTION_NAME,
      description: { type: "string" },
      parameters: userSchema("The function's arguments as a JSON Schema object"),
      strict: { type: "boolean" },
    }),
  },
  { $id: "OpenAiTool" },
);

const ToolChoice: JsonSchema = {
  $id: "OpenAiToolChoice",
  description: "Counts only with tools; a named function must be among them",
  oneOf: [
    { type: "string", enum: ["none", "auto", "required"] },
    object(["type", "function"], { type: { const: "function" }, function: object(["name"], { name: { type: "string" } }) }),
  ],
};

const ResponseFormat: JsonSchema = {
  $id: "OpenAiResponseFormat",
  oneOf: [
    object(["type"], { type: { const: "text" } }),
    object(["type"], { type: { const: "json_object" } }),
    object(["type", "json_schema"], {
      type: { const: "json_schema" },
      json_schema: object(["name", "schema"], {
        name: FUNCTION_NAME,
        description: { type: "string" },
        schema: userSchema("The JSON Schema the answer follows"),
        strict: { type: "boolean" },
      }),
    }),
  ],
};

export const ChatCompletionRequest = object(
  ["messages"],
  {
    model: text("The model (required unless `models` is given)"),
    models: { type: "array", items: { type: "string" }, description: "Fallback models, tried in order (OpenRouter's field)" },
    messages: { type: "array", minItems: 1, maxItems: 4096, items: Message },
    temperature: { type: "number", minimum: 0, maximum: 2 },
    top_p: { type: "number", minimum: 0, maximum: 1 },
    max_tokens: { type: "integer", minimum: 1 },
    max_completion_tokens: { type: "integer", minimum: 1 },
    seed: { type: "integer" },
    stop: { oneOf: [{ type: "string" }, { type: "array", maxItems: 4, items: { type: "string" } }] },
    user: { type: "string", maxLength: 256 },
    tools: { type: "array", maxItems: 128, items: Tool, description: "Function tools (names unique)" },
    tool_choice: ToolChoice,
    parallel_tool_calls: { type: "boolean" },
    response_format: ResponseFormat,
    stream: { type: "boolean", description: "true: server-sent events of chat.completion.chunk objects, then `data: [DONE]`" },
    stream_options: { type: "object", properties: { include_usage: { type: "boolean" } } },
  },
  {
    $id: "OpenAiChatCompletionRequest",
    description:
      "Function tools, tool_choice, parallel_tool_calls and response_format (text, json_object, json_schema) are passed to the model " +
      "(docs/inference.md). Legacy functions, n > 1, images, audio and logprobs are refused by name (400), not ignored; so is a field " +
      "OpenAI's API does not have. The few OpenAI fields the platform does not apply (store, metadata, service_tier, …) are accepted " +
      "and ignored: docs/errors.md lists them.",
  },
);

export const ChatCompletion = object(
  ["id", "object", "created", "model", "choices", "usage"],
  {
    id: text("chatcmpl-…"),
    object: { const: "chat.completion" },
    created: { type: "integer", description: "Unix seconds" },
    model: { type: "string" },
    choices: {
      type: "array",
      items: object(["index", "message", "finish_reason"], {
        index: { type: "integer" },
        message: object(["role", "content"], {
          role: { const: "assistant" },
          content: { type: ["string", "null"], description: "null when the answer is only tool calls" },
          refusal: { type: ["string", "null"] },
          tool_calls: { type: "array", minItems: 1, items: ToolCall },
        }),
        logprobs: { type: "null" },
        finish_reason: { type: "string", enum: ["stop", "length", "tool_calls", "content_filter"], description: "tool_calls when the answer holds tool calls" },
      }),
    },
    usage: object(["prompt_tokens", "completion_tokens", "total_tokens"], {
      prompt_tokens: { type: "integer" },
      completion_tokens: { type: "integer" },
      total_tokens: { type: "integer" },
    }),
  },
  { $id: "OpenAiChatCompletion" },
);

export const CHAT_STREAM = sseAlternative(
  "`data: {chat.completion.chunk}` events: `choices[0].delta` holds `content` pieces, or `tool_calls` parts (index; id, type and " +
    "function.name first, then function.arguments fragments); a last chunk carries finish_reason; then usage if stream_options.include_usage; " +
    'then `data: [DONE]`. A failure mid-stream is `data: {"error": {…}}` (OpenAI\'s error shape).',
);
