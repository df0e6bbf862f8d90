/**
 * Tools and structured output on POST /v1/chat/completions, with the official `openai` client
 * through the gateway, against the stand-ins speaking Ollama's and OpenAI's wire formats: tool
 * calls answered whole and streamed, forced choices, a tool round-trip as each provider receives
 * it, response_format mapped to Ollama's `format` and passed through as sent, refusals naming the
 * param (changing nothing at the provider), broken arguments from a provider, and usage records.
 */
import OpenAI from "openai";
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { InferencePlatform, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { OllamaStandin, OpenAiStandin } from "../support/provider-standins";

const WEATHER: ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string", enum: ["C", "F"] } }, required: ["city"] },
  },
};
const TIME: ChatCompletionTool = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } };
const ARGS = '{"city":"Paris","unit":"C"}';
const ASK: ChatCompletionMessageParam[] = [{ role: "user", content: "Weather in Paris?" }];

describe("inference - tools and structured output on /v1/chat/completions", () => {
  let p: InferencePlatform;
  let ollama: OllamaStandin;
  let vllm: OpenAiStandin;
  let client: OpenAI;
  const providerCalls = () => ollama.requests.length + vllm.requests.length;

  beforeAll(async () => {
    p = await startInferencePlatform();
    ({ ollama, vllm, client } = p);
  });

  afterAll(() => p?.stop());

  beforeEach(() => {
    ollama.set({});
    vllm.set({});
    ollama.withoutTools.clear();
    vllm.withoutTools.clear();
  });

  const KINDS = [
    { label: "the Ollama-format provider", model: "llama3.2:1b", standin: () => ollama as OllamaStandin | OpenAiStandin, path: "/api/chat" },
    { label: "the OpenAI-format provider", model: "Qwen/Qwen2.5-7B-Instruct", standin: () => vllm, path: "/v1/chat/completions" },
  ];
  const sentTo = (kind: (typeof KINDS)[number]) => kind.standin().lastRequest(kind.path)!.body;
  const callScript = (args = ARGS) => ({ chunks: [], toolCalls: [{ name: "get_weather", arguments: args }], completionTokens: 9 });

  test.each(KINDS)("inference - tools (auto) on $label: message.tool_calls with an id, finish_reason tool_calls, one usage record", async (kind) => {
    kind.standin().set(callScript());
    const completion = await client.chat.completions.create({ model: kind.model, messages: ASK, tools: [WEATHER, TIME], tool_choice: "auto" });
    const choice = completion.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_\w+$/), type: "function", function: { name: "get_weather", arguments: expect.any(String) } },
    ]);
    const [call] = choice.message.tool_calls!;
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ city: "Paris", unit: "C" });
    const sent = sentTo(kind);
    if (kind.path === "/api/chat") {
      expect(sent.tools).toEqual([
        { type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: WEATHER.function.parameters } },
        { type: "function", function: { name: "get_time", parameters: TIME.function.parameters } },
      ]);
      expect(sent).not.toHaveProperty("tool_choice");
    } else {
      expect([sent.tools, sent.tool_choice]).toEqual([[WEATHER, TIME], "auto"]);
    }
    expect(await p.recordOf(completion.id)).toMatchObject({ model: kind.model, outcome: "ok", prompt_tokens: 12, completion_tokens: 9, tokens_used: 21 });
  });

  test("inference - a named tool_choice and parallel_tool_calls reach the OpenAI-format provider as sent", async () => {
    vllm.set(callScript());
    const tool_choice = { type: "function" as const, function: { name: "get_weather" } };
    const completion = await client.chat.completions.create({
      model: "Qwen/Qwen2.5-7B-Instruct",
      messages: ASK,
      tools: [WEATHER, TIME],
      tool_choice,
      parallel_tool_calls: false,
    });
    expect(completion.choices[0].message.tool_calls?.map((c) => c.type === "function" && c.function.name)).toEqual(["get_weather"]);
    const sent = vllm.lastRequest("/v1/chat/completions")!.body;
    expect([sent.tool_choice, sent.parallel_tool_calls]).toEqual([tool_choice, false]);
  });

  test.each(KINDS)("inference - a tool round-trip on $label: the history's call and result as the provider's API carries them", async (kind) => {
    kind.standin().set({ chunks: ["It is 18 °C in Paris."] });
    const messages: ChatCompletionMessageParam[] = [
      ...ASK,
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: ARGS } }] },
      { role: "tool", tool_call_id: "call_1", content: "18 °C" },
    ];
    const completion = await client.chat.completions.create({ model: kind.model, messages, tools: [WEATHER] });
    expect([completion.choices[0].message.content, completion.choices[0].finish_reason]).toEqual(["It is 18 °C in Paris.", "stop"]);
    const history = sentTo(kind).messages.slice(1);
    if (kind.path === "/api/chat")
      expect(history).toEqual([
        { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris", unit: "C" } } }] },
        { role: "tool", content: "18 °C", tool_name: "get_weather" },
      ]);
    else expect(history).toEqual(messages.slice(1));
  });

  test.each([
    ...KINDS.map((kind) => ({ ...kind, withDone: false })),
    { ...KINDS[0], label: "the Ollama-format provider (calls in its done chunk)", withDone: true },
  ])("inference - streamed tool calls from $label: OpenAI's delta shape, joined by the client's stream helper", async (kind) => {
    kind.standin().set({ ...callScript(), toolCallsWithDone: kind.withDone });
    const stream = client.chat.completions.stream({ model: kind.model, messages: ASK, tools: [WEATHER], stream_options: { include_usage: true } });
    const chunks: ChatCompletionChunk[] = [];
    stream.on("chunk", (c) => chunks.push(c));
    const final = await stream.finalChatCompletion();
    expect(final.choices[0].finish_reason).toBe("tool_calls");
    const [call] = final.choices[0].message.tool_calls!;
    expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: "function", function: { name: "get_weather" } });
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ city: "Paris", unit: "C" });
    const parts = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(parts[0]).toEqual({ index: 0, id: call.id, type: "function", function: { name: "get_weather", arguments: expect.any(String) } });
    expect(parts.slice(1).every((d) => d.index === 0 && d.id === undefined && d.function?.name === undefined)).toBe(true);
    // The OpenAI-format provider's fragments are passed on as they come (Ollama's call is whole).
    expect(parts.length).toBe(kind.path === "/api/chat" ? 1 : 1 + Math.ceil(ARGS.length / 8));
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(await p.recordOf(final.id)).toMatchObject({ model: kind.model, outcome: "ok", stream: true, completion_tokens: 9 });
  });

  test.each(KINDS)("inference - response_format json_schema on $label: Ollama's format is the schema; OpenAI's field is sent as is", async (kind) => {
    kind.standin().set({ chunks: ['{"city":"Paris"}'] });
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
    const response_format = { type: "json_schema" as const, json_schema: { name: "place", schema, strict: true } };
    const completion = await client.chat.completions.create({ model: kind.model, messages: ASK, response_format });
    expect(JSON.parse(completion.choices[0].message.content!)).toEqual({ city: "Paris" });
    if (kind.path === "/api/chat") expect(sentTo(kind).format).toEqual(schema);
    else expect(sentTo(kind).response_format).toEqual(response_format);
    await client.chat.completions.create({ model: kind.model, messages: ASK, response_format: { type: "json_object" } });
    if (kind.path === "/api/chat") expect(sentTo(kind).format).toBe("json");
    else expect(sentTo(kind).response_format).toEqual({ type: "json_object" });
  });

  test.each([
    { label: "Ollama's model without tools", model: "qwen2.5:0.5b", standin: () => ollama as OllamaStandin | OpenAiStandin, says: /does not support tools/ },
    { label: "vLLM without tool calling", model: "Qwen/Qwen2.5-7B-Instruct", standin: () => vllm, says: /tool choice requires/ },
  ])("inference - $label: 400 BadRequestError naming tools (the provider's word in it), recorded as an error", async ({ model, standin, says }) => {
    standin().withoutTools.add(model);
    const errors = async () =>
      (await p.db.query("SELECT count(*)::int AS n FROM inference.inferences WHERE model = $1 AND error_code = 'VALIDATION_FAILED'", [model])).rows[0].n;
    const before = await errors();
    const err = await openAiErrorOf(client.chat.completions.create({ model, messages: ASK, tools: [WEATHER] }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toEqual({ message: expect.stringMatching(says), type: "invalid_request_error", param: "tools", code: "validation_failed" });
    // Without tools the same model answers; records are written in order, so the refusal's is in once this one is.
    const plain = await client.chat.completions.create({ model, messages: ASK });
    expect(plain.choices[0].message.content).toBe("Hello, world!");
    await p.recordOf(plain.id);
    expect(await errors()).toBe(before + 1);
  });

  test("inference - with fallbacks, a model that cannot take tools moves on to one that can; both attempts are recorded", async () => {
    ollama.withoutTools.add("qwen2.5:0.5b");
    vllm.set(callScript());
    const body = { model: "qwen2.5:0.5b", models: ["Qwen/Qwen2.5-7B-Instruct"], messages: ASK, tools: [WEATHER] };
    const completion = (await client.chat.completions.create(body as never)) as OpenAI.ChatCompletion;
    expect([completion.model, completion.choices[0].finish_reason]).toEqual(["Qwen/Qwen2.5-7B-Instruct", "tool_calls"]);
    expect(ollama.lastRequest("/api/chat")!.body).toMatchObject({ model: "qwen2.5:0.5b", tools: [expect.any(Object)] });
    expect(await p.recordOf(completion.id)).toMatchObject({ outcome: "ok", model: "Qwen/Qwen2.5-7B-Instruct" });
  });

  test.each<[string, Record<string, unknown>, string]>([
    ["tool_choice required", { tool_choice: "required" }, "tool_choice"],
    ["a named tool_choice", { tool_choice: { type: "function", function: { name: "get_weather" } } }, "tool_choice"],
    ["parallel_tool_calls false", { parallel_tool_calls: false }, "parallel_tool_calls"],
    ["a strict function tool", { tools: [{ ...WEATHER, function: { ...WEATHER.function, strict: true } }] }, "tools"],
  ])("inference - %s on an Ollama model is 400 naming it, and Ollama is never asked", async (_name, change, param) => {
    const calls = providerCalls();
    const err = await openAiErrorOf(client.chat.completions.create({ model: "llama3.2:1b", messages: ASK, tools: [WEATHER], ...change } as never));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toMatchObject({ type: "invalid_request_error", param, code: "validation_failed" });
    expect(providerCalls()).toBe(calls);
  });

  test.each<[string, Record<string, unknown>, string]>([
    ["a tool of another type", { tools: [{ type: "custom", custom: { name: "x" } }] }, "tools[0].type"],
    ["a tool name with spaces", { tools: [{ type: "function", function: { name: "get weather" } }] }, "tools[0].function.name"],
    ["tool_choice naming no offered tool", { tools: [WEATHER], tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice"],
    ["a tool message answering no call", { messages: [...ASK, { role: "tool", tool_call_id: "call_9", content: "x" }] }, "messages[1].tool_call_id"],
    ["json_schema without a schema", { response_format: { type: "json_schema", json_schema: { name: "x" } } }, "response_format.json_schema.schema"],
  ])("inference - %s is BadRequestError naming the param, before any provider call", async (_name, change, param) => {
    const calls = providerCalls();
    const err = await openAiErrorOf(client.chat.completions.create({ model: "Qwen/Qwen2.5-7B-Instruct", messages: ASK, ...change } as never));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toMatchObject({ type: "invalid_request_error", param, code: "validation_failed" });
    expect(providerCalls()).toBe(calls);
  });

  test("inference - arguments that are not JSON from the provider are a 502, not passed on", async () => {
    vllm.set(callScript('{"city": "Par'));
    const err = await openAiErrorOf(client.chat.completions.create({ model: "Qwen/Qwen2.5-7B-Instruct", messages: ASK, tools: [WEATHER] }));
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect([err.status, err.error]).toEqual([
      502,
      expect.objectContaining({ type: "server_error", code: "provider_error", message: expect.stringMatching(/not valid JSON/) }),
    ]);
  });

  test("inference - streamed arguments that are not JSON once whole end the stream with an error event (no finish, no [DONE])", async () => {
    vllm.set(callScript('{"city": "Par'));
    const { data: stream, response } = await client.chat.completions
      .create({ model: "Qwen/Qwen2.5-7B-Instruct", messages: ASK, tools: [WEATHER], stream: true })
      .withResponse();
    const chunks: ChatCompletionChunk[] = [];
    const err = await openAiErrorOf(
      (async () => {
        for await (const c of stream) chunks.push(c);
      })(),
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err.message)).toMatch(/not valid JSON/);
    expect(chunks.some((c) => c.choices[0]?.finish_reason)).toBe(false);
    const id = response.headers.get("x-inference-id")!;
    expect(await p.recordOf(id)).toMatchObject({ outcome: "error", error_code: "PROVIDER_ERROR", stream: true });
  });
});
