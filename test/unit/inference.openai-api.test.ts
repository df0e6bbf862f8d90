/** The /v1 translation (pure): what a chat or embeddings request becomes, what is refused and why, and MODEL_FALLBACKS. */
import { readFileSync } from "fs";
import path from "path";
import { openAiError } from "../../lib/openai-errors";
import { chatCompletion, embeddingList, openAiStreamFormat, parseChatCompletion, parseEmbeddings } from "../../services/inference/openai-api";
import { parseInferenceSettings, parseModelFallbacks } from "../../services/inference/settings";
import { CHAT_COMPLETION_FIELDS, V1_IGNORED_FIELDS } from "../../services/inference/openai-fields";

const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const fieldsOf = (work: () => unknown): string[] => {
  try {
    work();
  } catch (err) {
    return ((err as { data: Array<{ field: string }> }).data ?? []).map((d) => d.field);
  }
  throw new Error("expected a validation error");
};

describe("inference - /v1 chat requests", () => {
  test.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ["the minimum: no options set", {}, { model: "m", stream: false, includeUsage: false, temperature: undefined, maxTokens: undefined }],
    ["max_completion_tokens wins over max_tokens", { max_tokens: 10, max_completion_tokens: 20 }, { maxTokens: 20 }],
    ["max_tokens alone", { max_tokens: 10 }, { maxTokens: 10 }],
    ["a stop string becomes a list", { stop: "END" }, { stop: ["END"] }],
    ["nulls are absent", { temperature: null, stop: null, n: null, tools: null, seed: null }, { temperature: undefined, stop: undefined }],
    [
      "the off values of unsupported features pass",
      { n: 1, tools: [], tool_choice: "none", logprobs: false, response_format: { type: "text" } },
      { model: "m" },
    ],
    ["developer is a system message", { messages: [{ role: "developer", content: "x" }] }, { messages: [{ role: "system", content: "x" }] }],
    [
      "text parts are joined",
      {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "a" },
              { type: "text", text: "b" },
            ],
          },
        ],
      },
      { messages: [{ role: "user", content: "ab" }] },
    ],
    [
      "an assistant message with null content is empty",
      { messages: [{ role: "assistant", content: null }] },
      { messages: [{ role: "assistant", content: "" }] },
    ],
    ["models: fallbacks after model", { models: ["a", "b"] }, { model: "m", fallbacks: ["a", "b"] }],
    ["models without model: the first is the model", { model: undefined, models: ["a", "b"] }, { model: "a", fallbacks: ["b"] }],
    ["stream with usage", { stream: true, stream_options: { include_usage: true } }, { stream: true, includeUsage: true }],
    ["fields documented as ignored are accepted", { metadata: { a: 1 }, store: false, frequency_penalty: 0 }, { model: "m" }],
  ])("inference - %s", (_name, change, expected) => {
    expect(parseChatCompletion({ ...base, ...change })).toMatchObject(expected);
  });

  test.each<[string, unknown, string[]]>([
    ["a body that is not an object", [], ["(body)"]],
    ["no model", { messages: base.messages }, ["model"]],
    ["a blank model", { ...base, model: "  " }, ["model"]],
    ["an overlong model", { ...base, model: "x".repeat(257) }, ["model"]],
    ["messages not a list", { model: "m", messages: "hi" }, ["messages"]],
    ["an unknown role", { model: "m", messages: [{ role: "robot", content: "x" }] }, ["messages[0].role"]],
    ["a function message", { model: "m", messages: [{ role: "function", content: "x" }] }, ["messages[0].role"]],
    ["a malformed tool call in history", { model: "m", messages: [{ role: "assistant", content: null, tool_calls: [{}] }] }, ["messages[0].tool_calls[0]"]],
    ["an audio part", { model: "m", messages: [{ role: "user", content: [{ type: "input_audio" }] }] }, ["messages[0].content[0]"]],
    ["content a number", { model: "m", messages: [{ role: "user", content: 5 }] }, ["messages[0].content"]],
    ["temperature as a string", { ...base, temperature: "1" }, ["temperature"]],
    ["seed beyond safe integers", { ...base, seed: 2 ** 60 }, ["seed"]],
    ["an empty stop string", { ...base, stop: [""] }, ["stop"]],
    ["an overlong user", { ...base, user: "u".repeat(257) }, ["user"]],
    ["stream as a string", { ...base, stream: "yes" }, ["stream"]],
    ["stream_options a list", { ...base, stream_options: [] }, ["stream_options"]],
    ["functions", { ...base, functions: [{ name: "f" }] }, ["functions"]],
    ["audio", { ...base, audio: { voice: "alloy" } }, ["audio"]],
    ["image modality", { ...base, modalities: ["text", "audio"] }, ["modalities"]],
    ["logit_bias", { ...base, logit_bias: { "50256": -100 } }, ["logit_bias"]],
    ["an empty models list", { ...base, models: [] }, ["models"]],
    ["several problems at once", { model: "", messages: [], n: 3 }, ["model", "messages", "n"]],
    ["a field OpenAI's API does not have, first", { ...base, temperature: 3, top_k: 40 }, ["top_k", "temperature"]],
  ])("inference - %s is refused naming the field", (_name, body, fields) => {
    expect(fieldsOf(() => parseChatCompletion(body))).toEqual(fields);
  });

  test("inference - an unknown field is refused in OpenAI's words; every listed field is known, each ignored one accepted", () => {
    expect(() => parseChatCompletion({ ...base, repeat_penalty: 1.1, top_k: 4 })).toThrow("Unrecognized request argument supplied: repeat_penalty, top_k");
    const notUnknown = (field: string) => {
      try {
        parseChatCompletion({ ...base, [field]: "x" });
      } catch (err) {
        return !(err as { data: Array<{ field: string; message: string }> }).data.some((d) => d.field === field && /not a known field/.test(d.message));
      }
      return true;
    };
    expect([...CHAT_COMPLETION_FIELDS].filter((f) => !notUnknown(f))).toEqual([]);
    const ignored = Object.fromEntries(V1_IGNORED_FIELDS.chatCompletions.map((f) => [f, null]));
    expect(parseChatCompletion({ ...base, ...ignored, user: "u" })).toMatchObject({ model: "m", user: "u" });
  });

  test("inference - docs/errors.md lists every field /v1 accepts and ignores", () => {
    const doc = readFileSync(path.join(__dirname, "../../docs/errors.md"), "utf8");
    const listed = [...V1_IGNORED_FIELDS.chatCompletions, ...V1_IGNORED_FIELDS.embeddings];
    expect(listed.filter((f) => !doc.includes(`\`${f}\``))).toEqual([]);
  });
});

describe("inference - /v1 embeddings requests and answers", () => {
  test("inference - a string input is one input; base64 only when asked", () => {
    expect(parseEmbeddings({ model: "e", input: "x" })).toEqual({ model: "e", input: ["x"], base64: false });
    expect(parseEmbeddings({ model: "e", input: ["a", "b"], encoding_format: "base64" })).toEqual({ model: "e", input: ["a", "b"], base64: true });
  });

  test("inference - base64 is the little-endian float32 bytes OpenAI's clients decode", () => {
    const out = embeddingList({ id: "i", model: "e", vectors: [[0.5, -2]], promptTokens: 3 }, true);
    const bytes = Buffer.from(out.data[0].embedding as string, "base64");
    expect([bytes.readFloatLE(0), bytes.readFloatLE(4)]).toEqual([0.5, -2]);
    expect(out.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
  });

  test.each<[string, unknown, string[]]>([
    ["too many inputs", { model: "e", input: Array.from({ length: 2049 }, () => "x") }, ["input"]],
    ["a number input", { model: "e", input: 5 }, ["input"]],
    ["no model", { input: "x" }, ["model"]],
    ["an unknown field", { model: "e", input: "x", truncate: true }, ["truncate"]],
  ])("inference - %s is refused naming the field", (_name, body, fields) => {
    expect(fieldsOf(() => parseEmbeddings(body))).toEqual(fields);
  });
});

describe("inference - /v1 answers and errors", () => {
  const answer = { id: "abc", model: "m", text: "Hi", promptTokens: 3, completionTokens: 1, durationMs: 5 };

  test("inference - a completion in OpenAI's shape; a cut answer finishes with length", () => {
    expect(chatCompletion(answer, 100)).toEqual({
      id: "chatcmpl-abc",
      object: "chat.completion",
      created: 100,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "Hi", refusal: null }, logprobs: null, finish_reason: "stop" }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    });
    expect(chatCompletion({ ...answer, finishReason: "length" }, 100).choices[0].finish_reason).toBe("length");
  });

  test("inference - stream chunks: role on the first delta only, usage null until the usage chunk, then [DONE]", () => {
    const format = openAiStreamFormat(true, 100);
    const events = [format.delta("abc", "m", "H"), format.delta("abc", "m", "i"), format.done(answer)].join("").split("\n\n").filter(Boolean);
    expect(events.pop()).toBe("data: [DONE]");
    const chunks = events.map((e) => JSON.parse(e.slice("data: ".length)));
    expect(chunks.map((c) => c.choices[0]?.delta ?? null)).toEqual([{ role: "assistant", content: "H" }, { content: "i" }, {}, null]);
    expect(chunks.map((c) => c.usage)).toEqual([null, null, null, { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 }]);
    expect(openAiStreamFormat(false, 100).done(answer)).not.toContain("usage");
  });

  test.each<[string, number, string, unknown, Record<string, unknown>]>([
    [
      "validation",
      400,
      "VALIDATION_FAILED",
      [{ field: "temperature", message: "x" }],
      { type: "invalid_request_error", param: "temperature", code: "validation_failed" },
    ],
    ["credentials", 401, "UNAUTHORIZED", null, { type: "authentication_error", param: null, code: "invalid_api_key" }],
    ["a quota", 403, "QUOTA_EXCEEDED", { resource: "tokens" }, { type: "insufficient_quota", code: "insufficient_quota" }],
    ["an unknown model", 404, "MODEL_NOT_FOUND", null, { type: "invalid_request_error", code: "model_not_found" }],
    ["the requests limit", 429, "RATE_LIMITED", { limit: "requests" }, { type: "requests", code: "rate_limit_exceeded" }],
    ["the tokens limit", 429, "RATE_LIMITED", { limit: "tokens" }, { type: "tokens", code: "rate_limit_exceeded" }],
    ["a provider error", 502, "PROVIDER_ERROR", { provider: "x" }, { type: "server_error", param: null, code: "provider_error" }],
  ])("inference - %s in OpenAI's error shape", (_name, status, code, details, expected) => {
    expect(openAiError(status, code, "msg", details)).toEqual({ error: { message: "msg", param: null, ...expected } });
  });

  test("inference - a validation failure's message says what was wrong with each field, as OpenAI's do", () => {
    const details = [
      { field: "tools[0].function.name", message: "must be a function name" },
      { field: "temperature", message: "The 'temperature' field must be at most 2" },
    ];
    expect(openAiError(400, "VALIDATION_FAILED", "Request validation failed", details).error).toMatchObject({
      message: "tools[0].function.name: must be a function name; The 'temperature' field must be at most 2",
      param: "tools[0].function.name",
    });
    // A message of its own (unrecognized arguments, say) is kept.
    expect(openAiError(400, "VALIDATION_FAILED", "Unrecognized request argument supplied: foo", [{ field: "foo", message: "x" }]).error.message).toBe(
      "Unrecognized request argument supplied: foo",
    );
  });
});

describe("inference - MODEL_FALLBACKS, INFERENCE_RPM and INFERENCE_TPM", () => {
  test("inference - a map of model to fallbacks; unset is none", () => {
    expect(parseModelFallbacks('{"a": ["b", " c "]}')).toEqual({ a: ["b", "c"] });
    expect({ ...parseModelFallbacks(undefined) }).toEqual({});
    // No prototype: a model named like an Object method has no fallbacks by accident.
    expect(parseModelFallbacks('{"a": ["b"]}').constructor).toBeUndefined();
  });

  test.each(["{not json", "[]", '{"a": "b"}', '{"a": [1]}', '{"a": [""]}', '{"a": ["1","2","3","4","5","6"]}'])(
    "inference - MODEL_FALLBACKS=%s fails at start naming the variable",
    (raw) => {
      expect(() => parseModelFallbacks(raw)).toThrow(/^MODEL_FALLBACKS must be/);
    },
  );

  test("inference - rate limits default to unlimited; a bad value names the variable", () => {
    expect(parseInferenceSettings({})).toMatchObject({ requestsPerMinute: null, tokensPerMinute: null });
    expect(parseInferenceSettings({ INFERENCE_RPM: "60", INFERENCE_TPM: "unlimited" })).toMatchObject({ requestsPerMinute: 60, tokensPerMinute: null });
    expect(() => parseInferenceSettings({ INFERENCE_TPM: "0" })).toThrow(/^INFERENCE_TPM must be/);
    expect(() => parseInferenceSettings({ INFERENCE_RPM: "ten" })).toThrow(/^INFERENCE_RPM must be/);
  });
});
