/**
 * Tools on Anthropic's Messages API (POST /v1/messages), with the official `@anthropic-ai/sdk`
 * client through the gateway, against the stand-ins speaking Ollama's and OpenAI's wire formats:
 * tool_use blocks answered whole and streamed (input_json_delta joined by the client), a tool
 * round-trip as each provider receives it, tool_choice passed on, output_config.format as each
 * provider's structured output, and what a provider cannot honour
 * refused naming the Messages API's field (changing nothing at the provider).
 */
import Anthropic from "@anthropic-ai/sdk";
import { chatKinds, InferencePlatform, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";

const WEATHER: Anthropic.Tool = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const ARGS = '{"city":"Paris","unit":"C"}';
const ASK = { max_tokens: 64, messages: [{ role: "user" as const, content: "Weather in Paris?" }], tools: [WEATHER] };
const errorOf = async (work: Promise<unknown>) => (await openAiErrorOf(work)) as unknown as InstanceType<typeof Anthropic.APIError>;

describe("inference - tools on /v1/messages with @anthropic-ai/sdk", () => {
  let p: InferencePlatform;
  let client: Anthropic;
  const KINDS = chatKinds(() => p);
  const sentTo = (kind: (typeof KINDS)[number]) => kind.standin().lastRequest(kind.path)!.body;
  const callScript = { chunks: [], toolCalls: [{ name: "get_weather", arguments: ARGS }], completionTokens: 9 };

  beforeAll(async () => {
    p = await startInferencePlatform();
    client = new Anthropic({ baseURL: p.platform.baseUrl, apiKey: p.apiKey, maxRetries: 0 });
  });

  afterAll(() => p?.stop());

  beforeEach(() => {
    p.ollama.set({});
    p.vllm.set({});
  });

  test.each(KINDS)("inference - messages with tools on $label: a tool_use block with its input, stop_reason tool_use, one usage record", async (kind) => {
    kind.standin().set(callScript);
    const message = await client.messages.create({ ...ASK, model: kind.model, tool_choice: { type: "auto" } });
    expect([message.stop_reason, message.content]).toEqual([
      "tool_use",
      [{ type: "tool_use", id: expect.stringMatching(/^toolu_\w+$/), name: "get_weather", input: { city: "Paris", unit: "C" }, caller: { type: "direct" } }],
    ]);
    const sent = sentTo(kind);
    const tool = { type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: WEATHER.input_schema } };
    if (kind.path === "/api/chat") expect(sent.tools).toEqual([tool]);
    else expect([sent.tools, sent.tool_choice]).toEqual([[tool], "auto"]);
    expect(await p.recordOf(message.id.replace(/^msg_/, ""))).toMatchObject({ model: kind.model, outcome: "ok", completion_tokens: 9 });
  });

  test.each(KINDS)("inference - a streamed tool call on $label: input_json_delta events the client joins into the input", async (kind) => {
    kind.standin().set(callScript);
    const stream = client.messages.stream({ ...ASK, model: kind.model });
    const events: Anthropic.MessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const message = await stream.finalMessage();
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content).toEqual([expect.objectContaining({ type: "tool_use", name: "get_weather", input: { city: "Paris", unit: "C" } })]);
    const start = events.find((e) => e.type === "content_block_start");
    expect(start).toMatchObject({ index: 0, content_block: { type: "tool_use", name: "get_weather", input: {} } });
    const fragments = events.flatMap((e) => (e.type === "content_block_delta" && e.delta.type === "input_json_delta" ? [e.delta.partial_json] : []));
    expect(JSON.parse(fragments.join(""))).toEqual({ city: "Paris", unit: "C" });
    expect(events.at(-2)).toMatchObject({ type: "message_delta", delta: { stop_reason: "tool_use" } });
  });

  test.each(KINDS)("inference - a tool round-trip on $label: the tool_use and tool_result as the provider's API carries them", async (kind) => {
    kind.standin().set({ chunks: ["It is 18 °C in Paris."] });
    const message = await client.messages.create({
      ...ASK,
      model: kind.model,
      messages: [
        ...ASK.messages,
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris", unit: "C" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18 °C" }] },
      ],
    });
    expect([message.content, message.stop_reason]).toEqual([[{ type: "text", text: "It is 18 °C in Paris.", citations: null }], "end_turn"]);
    const history = sentTo(kind).messages.slice(1);
    if (kind.path === "/api/chat")
      expect(history).toEqual([
        { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris", unit: "C" } } }] },
        { role: "tool", content: "18 °C", tool_name: "get_weather" },
      ]);
    else
      expect(history).toEqual([
        { role: "assistant", content: null, tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: ARGS } }] },
        { role: "tool", content: "18 °C", tool_call_id: "toolu_1" },
      ]);
  });

  test.each(KINDS)("inference - output_config.format on $label: Ollama's format is the schema; OpenAI's response_format json_schema", async (kind) => {
    kind.standin().set({ chunks: ['{"city":"Paris"}'] });
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
    const message = await client.messages.create({
      model: kind.model,
      max_tokens: 64,
      messages: ASK.messages,
      output_config: { format: { type: "json_schema", schema } },
    });
    const [block] = message.content;
    expect(block.type === "text" && JSON.parse(block.text)).toEqual({ city: "Paris" });
    if (kind.path === "/api/chat") expect(sentTo(kind).format).toEqual(schema);
    else expect(sentTo(kind).response_format).toEqual({ type: "json_schema", json_schema: { name: "output", schema } });
  });

  test("inference - tool_choice tool and disable_parallel_tool_use reach the OpenAI-format provider as its tool_choice and parallel_tool_calls", async () => {
    p.vllm.set(callScript);
    await client.messages.create({
      ...ASK,
      model: "Qwen/Qwen2.5-7B-Instruct",
      tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
    });
    const sent = p.vllm.lastRequest("/v1/chat/completions")!.body;
    expect([sent.tool_choice, sent.parallel_tool_calls]).toEqual([{ type: "function", function: { name: "get_weather" } }, false]);
  });

  test.each<[string, Partial<Anthropic.MessageCreateParamsNonStreaming>, string]>([
    ["tool_choice any", { tool_choice: { type: "any" } }, "tool_choice"],
    ["disable_parallel_tool_use", { tool_choice: { type: "auto", disable_parallel_tool_use: true } }, "tool_choice.disable_parallel_tool_use"],
    ["a strict tool", { tools: [{ ...WEATHER, strict: true }] }, "tools"],
  ])("inference - %s on the Ollama-format provider is BadRequestError naming the field; Ollama is not asked", async (_name, change, field) => {
    const calls = p.ollama.requests.length;
    const err = await errorOf(client.messages.create({ ...ASK, model: "llama3.2:1b", ...change }));
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err.error as Anthropic.ErrorResponse).error).toEqual({ type: "invalid_request_error", message: expect.stringContaining(`${field}: `) });
    expect(p.ollama.requests.length).toBe(calls);
  });

  test("inference - a model without tool support is BadRequestError naming tools", async () => {
    p.ollama.withoutTools.add("qwen2.5:0.5b");
    try {
      const err = await errorOf(client.messages.create({ ...ASK, model: "qwen2.5:0.5b" }));
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      expect((err.error as Anthropic.ErrorResponse).error.message).toMatch(/^tools: .*does not support tools/);
    } finally {
      p.ollama.withoutTools.clear();
    }
  });
});
