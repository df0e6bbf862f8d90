/**
 * POST /v1/messages, Anthropic's Messages API (node_modules/@anthropic-ai/sdk resources/messages),
 * in Anthropic's shapes: the request as services/inference/anthropic-api.ts and anthropic-tools.ts
 * read it (text, tool_use and tool_result blocks, custom tools, tool_choice, output_config), the
 * `Message` answer and its stream events (anthropic-answers.ts), and Anthropic's error
 * `{"type": "error", "error": {"type", "message"}, "request_id"}` (lib/anthropic-errors.ts).
 */
import { anthropicError } from "../../../lib/anthropic-errors";
import type { ErrorShape } from "./responses";
import type { JsonSchema } from "./schema";
import { FUNCTION_NAME, object, sseAlternative, text, userSchema } from "./shapes";

/** Errors of /v1/messages are in Anthropic's shape and statuses (a provider's 502 is 500, the platform's 503 is 529). */
export const ANTHROPIC_ERROR: ErrorShape = {
  name: "AnthropicError",
  status: (platformStatus) => anthropicError(platformStatus, "", null).status,
  schema: object(["type", "error", "request_id"], {
    type: { const: "error" },
    error: object(["type", "message"], {
      type: {
        type: "string",
        enum: ["invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large"].concat([
          "rate_limit_error",
          "api_error",
          "timeout_error",
          "overloaded_error",
        ]),
      },
      message: text("A validation error's message names its fields (`field: message; …`)"),
    }),
    request_id: { type: ["string", "null"], description: "The X-Request-Id" },
  }),
};

const TextBlock = object(["type", "text"], { type: { const: "text" }, text: { type: "string" } });
const textOrBlocks: JsonSchema = { oneOf: [{ type: "string" }, { type: "array", items: TextBlock }] };

const ToolUseBlock = object(["type", "id", "name", "input"], {
  type: { const: "tool_use" },
  id: { type: "string", minLength: 1 },
  name: { type: "string", minLength: 1 },
  input: { type: "object" },
});

const ToolResultBlock = object(["type", "tool_use_id"], {
  type: { const: "tool_result" },
  tool_use_id: text("The id of a tool_use block of an earlier assistant message"),
  content: textOrBlocks,
  is_error: { type: "boolean" },
});

const Message: JsonSchema = {
  $id: "AnthropicMessageParam",
  oneOf: [
    object(["role", "content"], {
      role: { const: "user" },
      content: { oneOf: [{ type: "string" }, { type: "array", minItems: 1, items: { oneOf: [TextBlock, ToolResultBlock] } }] },
    }),
    object(["role", "content"], {
      role: { const: "assistant" },
      content: { oneOf: [{ type: "string" }, { type: "array", minItems: 1, items: { oneOf: [TextBlock, ToolUseBlock] } }] },
    }),
    object(["role", "content"], { role: { const: "system" }, content: textOrBlocks }),
  ],
};

const Tool = object(
  ["name", "input_schema"],
  {
    type: { const: "custom" },
    name: FUNCTION_NAME,
    description: { type: "string" },
    input_schema: { ...userSchema("The tool's input as a JSON Schema of type object"), required: ["type"], properties: { type: { const: "object" } } },
    strict: { type: "boolean" },
  },
  { $id: "AnthropicTool" },
);

const ToolChoice: JsonSchema = {
  $id: "AnthropicToolChoice",
  oneOf: [
    object(["type"], { type: { enum: ["auto", "any"] }, disable_parallel_tool_use: { type: "boolean" } }),
    object(["type", "name"], { type: { const: "tool" }, name: { type: "string" }, disable_parallel_tool_use: { type: "boolean" } }),
    object(["type"], { type: { const: "none" } }),
  ],
};

export const MessageCreateRequest = object(
  ["model", "max_tokens", "messages"],
  {
    model: { type: "string", minLength: 1, maxLength: 256 },
    max_tokens: { type: "integer", minimum: 1 },
    messages: { type: "array", minItems: 1, maxItems: 100_000, items: Message },
    system: textOrBlocks,
    tools: { type: "array", items: Tool, description: "Custom tools (names unique); server tools are refused" },
    tool_choice: ToolChoice,
    output_config: object([], {
      format: object(["type", "schema"], { type: { const: "json_schema" }, schema: userSchema("The JSON Schema the answer follows") }),
    }),
    stop_sequences: { type: "array", maxItems: 16, items: { type: "string", minLength: 1 } },
    temperature: { type: "number", minimum: 0, maximum: 1 },
    top_p: { type: "number", minimum: 0, maximum: 1 },
    metadata: object([], { user_id: { type: ["string", "null"], maxLength: 256 } }),
    stream: { type: "boolean", description: "true: server-sent events (message_start, content blocks, message_delta, message_stop)" },
  },
  {
    $id: "AnthropicMessageCreateRequest",
    description:
      "Thinking, images, documents, server tools, containers, MCP servers and citations are refused by name (400), not ignored; so is a " +
      "field the Messages API does not have. cache_control and service_tier are accepted and ignored.",
  },
);

const usage = object(["input_tokens", "output_tokens"], {
  input_tokens: { type: "integer" },
  output_tokens: { type: "integer" },
  cache_creation_input_tokens: { type: ["integer", "null"] },
  cache_read_input_tokens: { type: ["integer", "null"] },
});

export const MessageObject = object(
  ["id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"],
  {
    id: text("msg_…"),
    type: { const: "message" },
    role: { const: "assistant" },
    model: { type: "string" },
    content: {
      type: "array",
      items: { oneOf: [TextBlock, ToolUseBlock] },
      description: "The text (omitted when empty and the model called tools), then one tool_use block per call",
    },
    stop_reason: { type: "string", enum: ["end_turn", "max_tokens", "tool_use", "stop_sequence"] },
    stop_sequence: { type: ["string", "null"] },
    usage,
  },
  { $id: "AnthropicMessage" },
);

export const MESSAGE_STREAM = sseAlternative(
  "`event: <type>` and `data: {type, …}`: message_start; per content block content_block_start, content_block_delta " +
    "(text_delta, or input_json_delta for a tool_use block), content_block_stop; message_delta (stop_reason, usage); message_stop. " +
    "A failure is an `error` event in Anthropic's error shape.",
);
