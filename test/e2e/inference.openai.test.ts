/**
 * The OpenAI-compatible API through the HTTP gateway, with the official `openai` client as the
 * real client, against a provider stand-in speaking Ollama's wire format and one speaking
 * OpenAI's: models, chat completions plain and streamed (with usage), embeddings, the client's
 * error classes, bad input in OpenAI's error shape (changing nothing), and usage records.
 */
import OpenAI from "openai";
import { chatKinds, InferencePlatform, openAiClient, openAiErrorOf, sentChat, SKY_SENT, skyTurns, startInferencePlatform } from "../support/inference-platform";
import { http, waitFor } from "../support/platform";
import { OllamaStandin, OpenAiStandin, standinEmbedding } from "../support/provider-standins";

describe("inference - OpenAI-compatible API (/v1) with the openai client", () => {
  let p: InferencePlatform;
  let ollama: OllamaStandin;
  let vllm: OpenAiStandin;
  let client: OpenAI;
  const rows = async () => (await p.db.query("SELECT count(*)::int AS n FROM inference.inferences")).rows[0].n as number;
  /** The record count once a fresh valid inference is recorded (records are written in order: earlier ones are in too). */
  const settled = async () => {
    const valid = await client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }] });
    await p.recordOf(valid.id);
    return rows();
  };
  const providerCalls = () => ollama.requests.length + vllm.requests.length;
  const clientWith = (key: string) => openAiClient(p.platform.baseUrl, key);
  const errorOf = openAiErrorOf;

  beforeAll(async () => {
    p = await startInferencePlatform({ INFERENCE_TIMEOUT_MS: "1000" });
    ({ ollama, vllm, client } = p);
  });

  afterAll(() => p?.stop());

  beforeEach(() => {
    ollama.set({});
    vllm.set({});
  });

  test("inference - models.list names every model of every provider, owned_by its provider", async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    expect(models.map((m) => [m.id, m.owned_by, m.object])).toEqual([
      ["llama3.2:1b", "ollama", "model"],
      ["qwen2.5:0.5b", "ollama", "model"],
      ["Qwen/Qwen2.5-7B-Instruct", "vllm", "model"],
      ["vllm/llama3.2:1b", "vllm", "model"],
    ]);
  });

  test("inference - a JWT works as the bearer token too; no or wrong credentials are AuthenticationError", async () => {
    await expect(clientWith(p.token).models.list()).resolves.toBeDefined();
    const wrong = await errorOf(clientWith("ci_0000000000000000000000000000000a").models.list());
    expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(wrong.status).toBe(401);
    expect(wrong.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key", param: null, message: expect.any(String) });
    const none = await fetch(`${p.platform.baseUrl}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(none.status).toBe(401);
  });

  const KINDS = chatKinds(() => p);

  test.each(KINDS)("inference - chat.completions.create against $label: the answer, its usage, options mapped, one usage record", async (kind) => {
    const completion = await client.chat.completions.create({
      model: kind.model,
      messages: [{ role: "system", content: "Be brief." }, ...skyTurns()],
      temperature: 0.2,
      max_completion_tokens: 64,
      top_p: 0.5,
      stop: ["\n\n"],
      seed: 7,
      user: "end-user-1",
    });
    expect(completion).toMatchObject({
      object: "chat.completion",
      model: kind.model,
      choices: [{ index: 0, message: { role: "assistant", content: "Hello, world!" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
    });
    const sent = sentChat(kind);
    expect(sent.messages).toEqual(SKY_SENT);
    expect([sent.options.temperature, sent.options.top_p, sent.options.stop, sent.options.seed, sent.maxTokens]).toEqual([0.2, 0.5, ["\n\n"], 7, 64]);
    expect(await p.recordOf(completion.id)).toMatchObject({ model: kind.model, outcome: "ok", prompt_tokens: 12, completion_tokens: 4, tokens_used: 16 });
  });

  test.each(KINDS)("inference - a streamed completion from $label: deltas, the finish reason, usage, [DONE]", async (kind) => {
    const stream = await client.chat.completions.create({
      model: kind.model,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello, world!");
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe("stop");
    const last = chunks[chunks.length - 1];
    expect([last.choices, last.usage]).toEqual([[], { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 }]);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(await p.recordOf(last.id)).toMatchObject({ model: kind.model, outcome: "ok", stream: true, tokens_used: 16 });
  });

  test("inference - a stream the client abandons stops the provider call and counts the tokens generated until then", async () => {
    ollama.set({ gated: true });
    const closedBefore = ollama.closedEarly;
    const stream = await client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], stream: true });
    const chunks = stream[Symbol.asyncIterator]();
    const first = await chunks.next();
    ollama.release(1);
    expect((await chunks.next()).value?.choices[0].delta.content).toBe(", ");
    stream.controller.abort();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
    expect(await p.recordOf(first.value.id)).toMatchObject({ outcome: "aborted", stream: true, completion_tokens: 2, prompt_tokens: 1 });
  });

  test("inference - without include_usage a stream carries no usage; the raw body ends with data: [DONE]", async () => {
    const res = await http(p.platform.baseUrl, "POST", "/v1/chat/completions", {
      token: p.apiKey,
      body: { model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], stream: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(res.text).not.toContain('"usage"');
  });

  test("inference - an answer cut at max_tokens finishes with finish_reason length", async () => {
    ollama.set({ truncated: true });
    const completion = await client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
    expect(completion.choices[0].finish_reason).toBe("length");
  });

  test.each([
    ["the Ollama-format provider", "qwen2.5:0.5b"],
    ["the OpenAI-format provider", "Qwen/Qwen2.5-7B-Instruct"],
  ])("inference - embeddings.create against %s, base64 (the client's default) and float", async (_label, model) => {
    ollama.set({ promptTokens: 5 });
    vllm.set({ promptTokens: 5 });
    const input = ["The sky is blue", "Grass is green"];
    const viaBase64 = await client.embeddings.create({ model, input });
    expect(viaBase64.data.map((d) => d.embedding)).toEqual(input.map((t) => standinEmbedding(t).map((x) => Math.fround(x))));
    const asFloat = await client.embeddings.create({ model, input: "one", encoding_format: "float" });
    expect(asFloat).toMatchObject({ object: "list", model, data: [{ object: "embedding", index: 0, embedding: standinEmbedding("one") }] });
    expect(asFloat.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
  });

  test("inference - an unknown model is NotFoundError with code model_not_found", async () => {
    const err = await errorOf(client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error).toMatchObject({ type: "invalid_request_error", code: "model_not_found", param: null });
  });

  test("inference - a provider error is a 502 server_error; mid-stream it ends the stream with an error the client throws", async () => {
    vllm.set({ fail: { status: 500, message: "CUDA out of memory" } });
    const failed = await errorOf(client.chat.completions.create({ model: "Qwen/Qwen2.5-7B-Instruct", messages: [{ role: "user", content: "hi" }] }));
    expect([failed.status, failed.error]).toEqual([502, expect.objectContaining({ type: "server_error", code: "provider_error" })]);
    ollama.set({ errorMidStream: "model runner crashed" });
    const stream = await client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], stream: true });
    const seen: string[] = [];
    const err = await errorOf(
      (async () => {
        for await (const c of stream) seen.push(c.choices[0]?.delta?.content ?? "");
      })(),
    );
    expect(seen).toEqual(["Hello"]);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err.message)).toContain("model runner crashed");
  });

  const BAD: Array<[string, Record<string, unknown>, string]> = [
    ["a tool that is not a function", { tools: [{ type: "custom", custom: { name: "f" } }] }, "tools[0].type"],
    ["n = 2", { n: 2 }, "n"],
    ["an image part", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }] }, "messages[0].content[0]"],
    ["a tool message answering no call", { messages: [{ role: "tool", content: "42", tool_call_id: "c1" }] }, "messages[0].tool_call_id"],
    ["no messages", { messages: [] }, "messages"],
    ["temperature above 2", { temperature: 2.5 }, "temperature"],
    ["top_p above 1", { top_p: 1.5 }, "top_p"],
    ["max_tokens 0", { max_tokens: 0 }, "max_tokens"],
    ["five stop sequences", { stop: ["a", "b", "c", "d", "e"] }, "stop"],
    ["a non-integer seed", { seed: 1.5 }, "seed"],
    [
      "response_format json_schema without a schema",
      { response_format: { type: "json_schema", json_schema: { name: "x" } } },
      "response_format.json_schema.schema",
    ],
    ["logprobs", { logprobs: true }, "logprobs"],
    ["no model", { model: undefined }, "model"],
    ["a models list that is not a list", { models: "qwen2.5:0.5b" }, "models"],
  ];
  test.each(BAD)("inference - %s is BadRequestError in OpenAI's shape naming the param, and changes nothing", async (_name, change, param) => {
    const rowsBefore = await settled();
    const callsBefore = providerCalls();
    const body = { model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], ...change } as never;
    const err = await errorOf(client.chat.completions.create(body));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toEqual({ message: expect.any(String), type: "invalid_request_error", param, code: "validation_failed" });
    expect(providerCalls()).toBe(callsBefore);
    expect(await settled()).toBe(rowsBefore + 1);
  });

  test.each([
    ["token arrays as input", { model: "qwen2.5:0.5b", input: [[1, 2, 3]] }, "input"],
    ["an empty input", { model: "qwen2.5:0.5b", input: "" }, "input"],
    ["dimensions", { model: "qwen2.5:0.5b", input: "x", dimensions: 8 }, "dimensions"],
    ["an unknown encoding", { model: "qwen2.5:0.5b", input: "x", encoding_format: "int8" }, "encoding_format"],
  ])("inference - embeddings with %s is BadRequestError naming the param", async (_name, body, param) => {
    const callsBefore = providerCalls();
    const err = await errorOf(client.embeddings.create(body as never));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toMatchObject({ type: "invalid_request_error", param });
    expect(providerCalls()).toBe(callsBefore);
  });

  test.each([
    ["malformed JSON", { rawBody: '{"model": ', headers: { "content-type": "application/json" } }, 400, "invalid_json"],
    ["a JSON array", { rawBody: "[]", headers: { "content-type": "application/json" } }, 400, "invalid_json"],
    ["a body that is not JSON", { rawBody: "model=x", headers: { "content-type": "text/plain" } }, 415, "unsupported_media_type"],
  ])("inference - %s on /v1 is answered in OpenAI's shape", async (_name, opts, status, code) => {
    const res = await http(p.platform.baseUrl, "POST", "/v1/chat/completions", { ...opts, token: p.apiKey });
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: "invalid_request_error", param: null, code } });
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  test("inference - an unknown /v1 path is 404 in OpenAI's shape; /api keeps the platform's shape", async () => {
    const v1 = await http(p.platform.baseUrl, "GET", "/v1/assistants", { token: p.apiKey });
    expect([v1.status, v1.body]).toEqual([404, { error: { message: expect.any(String), type: "invalid_request_error", param: null, code: "not_found" } }]);
    const api = await http(p.platform.baseUrl, "GET", "/api/nothing-here", { token: p.apiKey });
    expect([api.status, api.body.error.code, api.body.error.details]).toEqual([404, "NOT_FOUND", null]);
  });
});
