/**
 * Every request field the OpenAI-compatible API (/v1) accepts: the one list to edit when /v1
 * learns a field. Any other field is 400 `invalid_request_error` with `param` naming it
 * (API-DECISIONS Part 3), as OpenAI's own API answers an unrecognized argument. The lists hold
 * every field the official `openai` client can send for these requests: read, refused by name
 * unless "off" (UNSUPPORTED in openai-api.ts), or accepted and ignored (docs/inference.md).
 */

/** Fields OpenAI's clients send that the platform accepts and does not apply (docs/inference.md lists them). */
export const V1_IGNORED_FIELDS = {
  chatCompletions: [
    "frequency_penalty",
    "presence_penalty",
    "metadata",
    "moderation",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning_effort",
    "safety_identifier",
    "service_tier",
    "store",
    "verbosity",
  ],
  embeddings: ["user"],
  responses: ["moderation", "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention", "safety_identifier", "service_tier", "stream_options"],
} as const;

export const CHAT_COMPLETION_FIELDS: ReadonlySet<string> = new Set([
  // read: openai-api.ts parseChatCompletion (`models`: OpenRouter's fallbacks)
  ...["model", "models", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "user", "stream", "stream_options"],
  // read: openai-api-tools.ts toolFieldsOf
  ...["tools", "tool_choice", "parallel_tool_calls", "response_format"],
  // refused by name unless "off": openai-api.ts UNSUPPORTED
  ...["functions", "function_call", "n", "logprobs", "top_logprobs"],
  ...["audio", "modalities", "logit_bias", "prediction", "web_search_options"],
  ...V1_IGNORED_FIELDS.chatCompletions,
]);

export const EMBEDDINGS_FIELDS: ReadonlySet<string> = new Set(["model", "input", "encoding_format", "dimensions", ...V1_IGNORED_FIELDS.embeddings]);

/** POST /v1/responses (responses-api.ts): read, refused by name unless "off" (its UNSUPPORTED), or ignored. */
export const RESPONSES_FIELDS: ReadonlySet<string> = new Set([
  ...["model", "models", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "temperature", "top_p", "max_output_tokens"],
  ...["stream", "store", "previous_response_id", "metadata", "user"],
  ...["background", "conversation", "context_management", "include", "prompt", "reasoning", "top_logprobs", "truncation"],
  ...V1_IGNORED_FIELDS.responses,
]);
