/**
 * Anthropic's Messages API (POST /v1/messages) through the HTTP gateway, with the official
 * `@anthropic-ai/sdk` client as the real client, against provider stand-ins speaking Ollama's and
 * OpenAI's wire formats: messages plain and streamed (the events in order, finalMessage), API key
 * and JWT credentials, the client's error classes from Anthropic's error shape (bad input changing
 * nothing), usage records, rate-limit headers, fallbacks, and /v1/models read by both clients.
 */
import Anthropic from "@anthropic-ai/sdk";
import { chatKinds, InferencePlatform, openAiErrorOf, sentChat, SKY_SENT, skyTurns, startInferencePlatform } from "../support/inference-platform";
import { http, waitFor } from "../support/platform";
import { OllamaStandin, OpenAiStandin } from "../support/provider-standins";

const anthropicClient = (baseURL: string, credentials: { apiKey: string } | { authToken: string }) =>
  new Anthropic({ baseURL, apiKey: null, authToken: null, maxRetries: 0, ...credentials });

/** The error a call fails with, as the Anthropic client throws it (the test fails when it does not). */
const errorOf = async (work: Promise<unknown>) => (await openAiErrorOf(work)) as unknown as InstanceType<typeof Anthropic.APIError>;

describe("inference - Anthropic's Messages API (/v1/messages) with @anthropic-ai/sdk", () => {
  let p: InferencePlatform;
  let ollama: OllamaStandin;
  let vllm: OpenAiStandin;
  let client: Anthropic;
  const hi = { model: "llama3.2:1b", max_tokens: 64, messages: [{ role: "user" as const, content: "hi" }] };
  const recordOf = (id: string) => p.recordOf(id.replace(/^msg_/, ""));
  const rows = async () => (await p.db.query("SELECT count(*)::int AS n FROM inference.inferences")).rows[0].n as number;
  /** The record count once a fresh valid inference is recorded (records are written in order: earlier ones are in too). */
  const settled = async () => {
    await recordOf((await client.messages.create(hi)).id);
    return rows();
  };
  const providerCalls = () => ollama.requests.length + vllm.requests.length;

  beforeAll(async () => {
    p = await startInferencePlatform({
      INFERENCE_TIMEOUT_MS: "1000",
      INFERENCE_RPM: "100000",
      MODEL_FALLBACKS: JSON.stringify({ "qwen2.5:0.5b": ["Qwen/Qwen2.5-7B-Instruct"] }),
    });
    ({ ollama, vllm } = p);
    client = anthropicClient(p.platform.baseUrl, { apiKey: p.apiKey });
  });

  afterAll(() => p?.stop());

  beforeEach(() => {
    ollama.set({});
    vllm.set({});
  });

  const KINDS = chatKinds(() => p);

  test.each(KINDS)("inference - messages.create against $label: the Message, its usage, options mapped, one usage record", async (kind) => {
    const message = await client.messages.create({
      model: kind.model,
      max_tokens: 64,
      system: [{ type: "text", text: "Be brief." }],
      messages: [...skyTurns()],
      stop_sequences: ["\n\n"],
      metadata: { user_id: "end-user-1" },
      ...({ temperature: 0.2, top_p: 0.5 } as object),
    });
    expect(message).toEqual({
      id: expect.stringMatching(/^msg_/),
      type: "message",
      role: "assistant",
      model: kind.model,
      content: [{ type: "text", text: "Hello, world!", citations: null }],
      stop_reason: "end_turn",
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: expect.objectContaining({ input_tokens: 12, output_tokens: 4 }),
    });
    const sent = sentChat(kind);
    expect(sent.messages).toEqual(SKY_SENT);
    expect([sent.options.temperature, sent.options.top_p, sent.options.stop, sent.maxTokens]).toEqual([0.2, 0.5, ["\n\n"], 64]);
    // Ollama's API has no end-user field.
    if (kind.path !== "/api/chat") expect(sent.user).toBe("end-user-1");
    expect(await recordOf(message.id)).toMatchObject({
      model: kind.model,
      outcome: "ok",
      stream: false,
      prompt_tokens: 12,
      completion_tokens: 4,
      tokens_used: 16,
    });
  });

  test("inference - a JWT works as the Bearer token (authToken); the answers carry the rate-limit headers", async () => {
    const viaJwt = anthropicClient(p.platform.baseUrl, { authToken: p.token });
    const { data, response } = await viaJwt.messages.create(hi).withResponse();
    expect(data.content).toEqual([{ type: "text", text: "Hello, world!", citations: null }]);
    const remaining = Number(response.headers.get("x-ratelimit-remaining-requests"));
    const next = await client.messages.create(hi).withResponse();
    expect(Number(next.response.headers.get("x-ratelimit-remaining-requests"))).toBe(remaining - 1);
  });

  test.each(KINDS)("inference - messages.stream against $label: the events in order, finalMessage, a stream usage record", async (kind) => {
    const stream = client.messages.stream({ ...hi, model: kind.model });
    const events: Anthropic.MessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      ...Array(4).fill("content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const message = await stream.finalMessage();
    expect(message).toMatchObject({
      model: kind.model,
      role: "assistant",
      content: [{ type: "text", text: "Hello, world!" }],
      stop_reason: "end_turn",
      usage: { input_tokens: 12, output_tokens: 4 },
    });
    expect(await recordOf(message.id)).toMatchObject({ model: kind.model, outcome: "ok", stream: true, tokens_used: 16 });
  });

  test("inference - the raw stream: server-sent events, each with its event name", async () => {
    const res = await http(p.platform.baseUrl, "POST", "/v1/messages", {
      headers: { "x-api-key": p.apiKey, "anthropic-version": "2023-06-01" },
      body: { ...hi, stream: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const names = [...res.text.matchAll(/^event: (\w+)\ndata: \{"type":"(\w+)"/gm)].map((m) => [m[1], m[2]]);
    expect(names.every(([event, type]) => event === type)).toBe(true);
    expect(names.at(-1)).toEqual(["message_stop", "message_stop"]);
    expect(res.text.trimEnd().split("\n\n")).toHaveLength(names.length);
  });

  test("inference - a stream the client abandons stops the provider call and counts the tokens generated until then", async () => {
    ollama.set({ gated: true });
    const closedBefore = ollama.closedEarly;
    const stream = await client.messages.create({ ...hi, stream: true });
    const events = stream[Symbol.asyncIterator]();
    const start = (await events.next()).value as Anthropic.RawMessageStartEvent;
    ollama.release(1);
    const seen: string[] = [];
    while (seen.length < 2) {
      const e = (await events.next()).value as Anthropic.RawMessageStreamEvent;
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") seen.push(e.delta.text);
    }
    expect(seen).toEqual(["Hello", ", "]);
    stream.controller.abort();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
    expect(await recordOf(start.message.id)).toMatchObject({ outcome: "aborted", stream: true, completion_tokens: 2 });
  });

  test("inference - a provider failure mid-stream is an error event the client throws", async () => {
    ollama.set({ errorMidStream: "model runner crashed" });
    const stream = client.messages.stream(hi);
    const texts: string[] = [];
    stream.on("text", (t) => texts.push(t));
    const err = await errorOf(stream.finalMessage());
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.error).toEqual({ type: "error", error: { type: "api_error", message: expect.stringContaining("model runner crashed") } });
    expect(texts).toEqual(["Hello"]);
  });

  test("inference - a provider error is 500 api_error; MODEL_FALLBACKS moves on and the Message names the model that answered", async () => {
    vllm.set({ fail: { status: 500, message: "CUDA out of memory" } });
    const failed = await errorOf(client.messages.create({ ...hi, model: "Qwen/Qwen2.5-7B-Instruct" }));
    expect(failed).toBeInstanceOf(Anthropic.InternalServerError);
    expect([failed.status, (failed.error as Anthropic.ErrorResponse).error.type]).toEqual([500, "api_error"]);
    vllm.set({});
    ollama.set({ fail: { status: 500, message: "model crashed" } });
    const message = await client.messages.create({ ...hi, model: "qwen2.5:0.5b" });
    expect([message.model, message.content]).toEqual(["Qwen/Qwen2.5-7B-Instruct", [{ type: "text", text: "Hello, world!", citations: null }]]);
  });

  test("inference - a wrong key is AuthenticationError and no key 401, both in Anthropic's shape", async () => {
    const wrong = await errorOf(anthropicClient(p.platform.baseUrl, { apiKey: "ci_0000000000000000000000000000000a" }).messages.create(hi));
    expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(wrong.error).toEqual({ type: "error", error: { type: "authentication_error", message: expect.any(String) }, request_id: expect.any(String) });
    const none = await http(p.platform.baseUrl, "POST", "/v1/messages", { body: hi });
    expect([none.status, none.body.error?.type, none.body.type]).toEqual([401, "authentication_error", "error"]);
    expect(none.body.request_id).toBe(none.headers.get("x-request-id"));
  });

  test("inference - an unknown model is NotFoundError (not_found_error)", async () => {
    const err = await errorOf(client.messages.create({ ...hi, model: "no-such-model" }));
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect((err.error as Anthropic.ErrorResponse).error).toEqual({ type: "not_found_error", message: expect.stringContaining("no-such-model") });
  });

  const BAD: Array<[string, Record<string, unknown>, string]> = [
    ["an unknown field", { frobnicate: true }, "frobnicate"],
    ["no max_tokens", { max_tokens: undefined }, "max_tokens"],
    ["thinking", { thinking: { type: "enabled", budget_tokens: 1024 } }, "thinking"],
    [
      "an image",
      { messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBO" } }] }] },
      "messages[0].content[0]",
    ],
    ["a server tool", { tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools[0].type"],
    ["mcp_servers", { mcp_servers: [{ type: "url", url: "https://example.com/mcp", name: "x" }] }, "mcp_servers"],
    ["a container", { container: "container_1" }, "container"],
    ["temperature above 1", { temperature: 1.5 }, "temperature"],
  ];
  test.each(BAD)("inference - %s is BadRequestError naming the field, and changes nothing", async (_name, change, field) => {
    const rowsBefore = await settled();
    const callsBefore = providerCalls();
    const err = await errorOf(client.messages.create({ ...hi, ...change } as never));
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    const body = err.error as Anthropic.ErrorResponse;
    expect([body.type, body.error.type]).toEqual(["error", "invalid_request_error"]);
    expect(body.error.message).toContain(`${field}: `);
    expect(providerCalls()).toBe(callsBefore);
    expect(await settled()).toBe(rowsBefore + 1);
  });

  test("inference - malformed JSON on /v1/messages is answered in Anthropic's shape", async () => {
    const res = await http(p.platform.baseUrl, "POST", "/v1/messages", {
      token: p.apiKey,
      rawBody: '{"model": ',
      headers: { "content-type": "application/json" },
    });
    expect([res.status, res.body.type, res.body.error.type]).toEqual([400, "error", "invalid_request_error"]);
  });

  test("inference - models.list with the Anthropic client; the openai client still reads the same answer", async () => {
    const models: Anthropic.ModelInfo[] = [];
    for await (const m of client.models.list()) models.push(m);
    expect(models.map((m) => [m.type, m.id, m.display_name])).toEqual([
      ["model", "llama3.2:1b", "llama3.2:1b"],
      ["model", "qwen2.5:0.5b", "qwen2.5:0.5b"],
      ["model", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"],
      ["model", "vllm/llama3.2:1b", "vllm/llama3.2:1b"],
    ]);
    expect(Number.isNaN(Date.parse(models[0].created_at))).toBe(false);
    const viaOpenAi = [];
    for await (const m of p.client.models.list()) viaOpenAi.push(m);
    expect(viaOpenAi.map((m) => [m.id, m.object, m.owned_by])).toEqual(
      models.map((m) => [m.id, "model", m.id.startsWith("vllm/") || m.id.startsWith("Qwen/") ? "vllm" : "ollama"]),
    );
  });
});
