/**
 * The routes the gateway aliases under /v1 (api-gateway.service.ts), each in its own API's shapes:
 * OpenAI's (models, embeddings here; chat completions: openai-chat.ts; responses:
 * openai-responses.ts; files and batches: openai-batches.ts) with OpenAI's error `{"error": {"message", "type", "param", "code"}}`
 * (lib/openai-errors.ts), and Anthropic's Messages API (anthropic.ts) with Anthropic's. Keyed like
 * OPERATIONS; each schema with `$id` is published once under that name.
 */
import type { ErrorShape, Operation } from "./responses";
import { ANTHROPIC_ERROR, MESSAGE_STREAM, MessageCreateRequest, MessageObject } from "./anthropic";
import { CHAT_STREAM, ChatCompletion, ChatCompletionRequest } from "./openai-chat";
import { RESPONSE_STREAM, ResponseCreateRequest, ResponseObject } from "./openai-responses";
import { list, object } from "./shapes";
import { BATCH_OPERATIONS } from "./openai-batches";

/** Errors of the /v1 routes are in OpenAI's shape, not the platform's (generator.ts errorResponses), unless a route says otherwise. */
export const OPENAI_ERROR: ErrorShape = {
  name: "OpenAiError",
  schema: {
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
  { model: { type: "string" }, usage: object(["prompt_tokens", "total_tokens"], { prompt_tokens: { type: "integer" }, total_tokens: { type: "integer" } }) },
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

export const V1_OPERATIONS: Record<string, Operation> = {
  "GET /v1/models": { tag: "openai", summary: "The models (OpenAI's list)", status: 200, response: ModelList },
  "POST /v1/chat/completions": {
    tag: "openai",
    summary: "A chat completion (OpenAI's API)",
    status: 200,
    request: ChatCompletionRequest,
    response: ChatCompletion,
    alternatives: { "text/event-stream": CHAT_STREAM },
    errors: INFERENCE_ERRORS,
  },
  "POST /v1/responses": {
    tag: "openai",
    summary: "A response (OpenAI's Responses API, stateless)",
    status: 200,
    request: ResponseCreateRequest,
    response: ResponseObject,
    alternatives: { "text/event-stream": RESPONSE_STREAM },
    errors: INFERENCE_ERRORS,
  },
  "POST /v1/messages": {
    tag: "anthropic",
    summary: "A message (Anthropic's Messages API)",
    description:
      "Anthropic's clients send the API key as `x-api-key` (the apiKey scheme); `anthropic-version` and `anthropic-beta` are accepted and not needed.",
    status: 200,
    request: MessageCreateRequest,
    response: MessageObject,
    alternatives: { "text/event-stream": MESSAGE_STREAM },
    errors: INFERENCE_ERRORS,
    errorShape: ANTHROPIC_ERROR,
  },
  "POST /v1/embeddings": {
    tag: "openai",
    summary: "Embeddings (OpenAI's API)",
    status: 200,
    request: EmbeddingsRequest,
    response: EmbeddingList,
    errors: INFERENCE_ERRORS,
  },
  ...BATCH_OPERATIONS,
};
