/**
 * The OpenAI-compatible routes the gateway aliases under /v1 (api-gateway.service.ts), in OpenAI's
 * shapes: the fields services/inference/openai-api.ts reads and writes, and OpenAI's error
 * `{"error": {"message", "type", "param", "code"}}` (lib/openai-errors.ts). Keyed like OPERATIONS;
 * each schema with `$id` is published once under that name.
 */
import type { Operation } from "./responses";
import type { JsonSchema } from "./schema";

/** Errors of the /v1 routes are in OpenAI's shape, not the platform's (generator.ts errorResponses). */
export const OPENAI_ERROR = "OpenAiError";

export const OPENAI_SCHEMAS: Record<string, JsonSchema> = {
  [OPENAI_ERROR]: {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type", "param", "code"],
        properties: {
          message: { type: "string" },
          type: {
            type: "string",
            description: "invalid_request_error, authentication_error, permission_error, insufficient_quota, requests, tokens or server_error",
          },
          param: { type: ["string", "null"], description: "The first invalid field of the request" },
          code: {
            type: ["string", "null"],
            description: "OpenAI's code where one exists (invalid_api_key, model_not_found, …), else the platform's in lowercase",
          },
        },
      },
    },
  },
};

const text = (description: string): JsonSchema => ({ type: "string", description });
const object = (required: string[], properties: Record<string, JsonSchema>, more: JsonSchema = {}): JsonSchema => ({
  type: "object",
  required,
  properties,
  ...more,
});
/** OpenAI's `{"object": "list", "data": [...]}` of `item`s, with more fields beside. */
const list = (id: string, item: JsonSchema, more: Record<string, JsonSchema> = {}): JsonSchema =>
  object(["object", "data", ...Object.keys(more)], { object: { const: "list" }, data: { type: "array", items: item }, ...more }, { $id: id });
const usage = (completion: boolean): JsonSchema =>
  completion
    ? object(["prompt_tokens", "completion_tokens", "total_tokens"], {
        prompt_tokens: { type: "integer" },
        completion_tokens: { type: "integer" },
        total_tokens: { type: "integer" },
      })
    : object(["prompt_tokens", "total_tokens"], { prompt_tokens: { type: "integer" }, total_tokens: { type: "integer" } });
const content: JsonSchema = {
  oneOf: [
    { type: "string" },
    { type: "array", items: object(["type", "text"], { type: { const: "text" }, text: { type: "string" } }) },
    { type: "null", description: "assistant messages only" },
  ],
};

const ChatCompletionRequest = object(
  ["messages"],
  {
    model: text("The model (required unless `models` is given)"),
    models: { type: "array", items: { type: "string" }, description: "Fallback models, tried in order (OpenRouter's field)" },
    messages: {
      type: "array",
      minItems: 1,
      items: object(["role", "content"], { role: { type: "string", enum: ["system", "developer", "user", "assistant"] }, content }),
    },
    temperature: { type: "number", minimum: 0, maximum: 2 },
    top_p: { type: "number", minimum: 0, maximum: 1 },
    max_tokens: { type: "integer", minimum: 1 },
    max_completion_tokens: { type: "integer", minimum: 1 },
    seed: { type: "integer" },
    stop: { oneOf: [{ type: "string" }, { type: "array", maxItems: 4, items: { type: "string" } }] },
    user: { type: "string", maxLength: 256 },
    stream: { type: "boolean", description: "true: server-sent events of chat.completion.chunk objects, then `data: [DONE]`" },
    stream_options: { type: "object", properties: { include_usage: { type: "boolean" } } },
  },
  {
    $id: "OpenAiChatCompletionRequest",
    description:
      "Tools, n > 1, images, audio, logprobs and response_format other than text are refused by name (400), not ignored; so is a field " +
      "OpenAI's API does not have. The few OpenAI fields the platform does not apply (store, metadata, service_tier, …) are accepted " +
      "and ignored: docs/errors.md lists them.",
  },
);

const ChatCompletion = object(
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
        message: object(["role", "content"], { role: { const: "assistant" }, content: { type: ["string", "null"] }, refusal: { type: ["string", "null"] } }),
        logprobs: { type: "null" },
        finish_reason: { type: ["string", "null"] },
      }),
    },
    usage: usage(true),
  },
  { $id: "OpenAiChatCompletion" },
);

const EmbeddingsRequest = object(
  ["model", "input"],
  {
    model: { type: "string" },
    input: {
      oneOf: [{ type: "string" }, { type: "array", minItems: 1, maxItems: 2048, items: { type: "string" } }],
      description: "Text only (no token arrays)",
    },
    encoding_format: { type: "string", enum: ["float", "base64"] },
  },
  { $id: "OpenAiEmbeddingsRequest", description: "A field OpenAI's API does not have is refused by name (400); `user` is accepted and ignored." },
);

const EmbeddingList = list(
  "OpenAiEmbeddingList",
  object(["object", "index", "embedding"], {
    object: { const: "embedding" },
    index: { type: "integer" },
    embedding: {
      oneOf: [
        { type: "array", items: { type: "number" } },
        { type: "string", description: "base64 of float32 values" },
      ],
    },
  }),
  { model: { type: "string" }, usage: usage(false) },
);

const ModelList = list(
  "OpenAiModelList",
  object(["id", "object", "created", "owned_by"], {
    id: { type: "string" },
    object: { const: "model" },
    created: { type: "integer" },
    owned_by: { type: "string" },
  }),
);

const INFERENCE_ERRORS: Operation["errors"] = ["VALIDATION_FAILED", "MODEL_NOT_FOUND", "PROVIDER_ERROR", "PROVIDER_TIMEOUT", "QUOTA_EXCEEDED", "RATE_LIMITED"];

export const OPENAI_OPERATIONS: Record<string, Operation> = {
  "GET /v1/models": { tag: "openai", summary: "The models (OpenAI's list)", status: 200, response: ModelList },
  "POST /v1/chat/completions": {
    tag: "openai",
    summary: "A chat completion (OpenAI's API)",
    status: 200,
    request: ChatCompletionRequest,
    response: ChatCompletion,
    alternatives: {
      "text/event-stream": {
        schema: { type: "string", description: "`data: {chat.completion.chunk}` events, then `data: [DONE]`" },
        description: "With stream: true, server-sent events",
      },
    },
    errors: INFERENCE_ERRORS,
  },
  "POST /v1/embeddings": {
    tag: "openai",
    summary: "Embeddings (OpenAI's API)",
    status: 200,
    request: EmbeddingsRequest,
    response: EmbeddingList,
    errors: INFERENCE_ERRORS,
  },
};
