/**
 * Function tools and structured output on POST /v1/responses, with the official `openai` client
 * through the gateway, against the stand-ins speaking Ollama's and OpenAI's wire formats: a call
 * answered as a function_call item and streamed as the function_call_arguments events, a tool
 * round-trip (function_call and function_call_output items) as each provider receives it,
 * text.format reaching the provider, and a provider's refusal named in the Responses API's words.
 */
import OpenAI from "openai";
import type { FunctionTool, ResponseInputItem, ResponseStreamEvent } from "openai/resources/responses/responses";
import { InferencePlatform, openAiErrorOf, providerKinds, resetStandins, sentTo, startInferencePlatform } from "../support/inference-platform";

const WEATHER: FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string", enum: ["C", "F"] } }, required: ["city"] },
  strict: null,
};
const ARGS = '{"city":"Paris","unit":"C"}';
const callScript = () => ({ chunks: [], toolCalls: [{ name: "get_weather", arguments: ARGS }], completionTokens: 9 });

describe("inference - tools and structured output on /v1/responses", () => {
  let p: InferencePlatform;
  const providerCalls = () => p.ollama.requests.length + p.vllm.requests.length;

  beforeAll(async () => {
    p = await startInferencePlatform();
  });

  afterAll(() => p?.stop());

  beforeEach(() => resetStandins(p));

  const KINDS = providerKinds(() => p);

  test.each(KINDS)("inference - a function tool on $label: a function_call item with a call_id, the tool sent in the provider's shape, usage", async (kind) => {
    kind.standin().set(callScript());
    const response = await p.client.responses.create({ model: kind.model, input: "Weather in Paris?", tools: [WEATHER], tool_choice: "auto" });
    expect(response.status).toBe("completed");
    expect(response.output).toEqual([
      {
        type: "function_call",
        id: expect.stringMatching(/^fc_/),
        call_id: expect.stringMatching(/^call_\w+$/),
        name: "get_weather",
        arguments: expect.any(String),
        status: "completed",
      },
    ]);
    const [call] = response.output;
    expect(call.type === "function_call" && JSON.parse(call.arguments)).toEqual({ city: "Paris", unit: "C" });
    expect(response.output_text).toBe("");
    const tool = { type: "function", function: { name: "get_weather", description: WEATHER.description, parameters: WEATHER.parameters } };
    expect(sentTo(kind).tools).toEqual([tool]);
    expect(await p.recordOf(response.id.replace(/^resp_/, ""))).toMatchObject({ outcome: "ok", prompt_tokens: 12, completion_tokens: 9, tokens_used: 21 });
  });

  test.each(KINDS)("inference - a tool round-trip on $label: the function_call and its output as the provider's API carries them", async (kind) => {
    kind.standin().set({ chunks: ["It is 18 °C in Paris."] });
    const input: ResponseInputItem[] = [
      { role: "user", content: "Weather in Paris?" },
      { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: ARGS, status: "completed" },
      { type: "function_call_output", call_id: "call_1", output: "18 °C" },
    ];
    const response = await p.client.responses.create({ model: kind.model, input, tools: [WEATHER] });
    expect(response.output_text).toBe("It is 18 °C in Paris.");
    const history = sentTo(kind).messages.slice(1);
    if (kind.path === "/api/chat")
      expect(history).toEqual([
        { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris", unit: "C" } } }] },
        { role: "tool", content: "18 °C", tool_name: "get_weather" },
      ]);
    else
      expect(history).toEqual([
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: ARGS } }] },
        { role: "tool", tool_call_id: "call_1", content: "18 °C" },
      ]);
  });

  test.each(KINDS)("inference - a streamed tool call from $label: the function_call events, finalResponse() with the whole arguments", async (kind) => {
    kind.standin().set(callScript());
    const stream = p.client.responses.stream({ model: kind.model, input: "Weather in Paris?", tools: [WEATHER] });
    const events: ResponseStreamEvent[] = [];
    stream.on("event", (e) => events.push(e));
    const final = await stream.finalResponse();
    const types = events.map((e) => e.type);
    const deltas = events.flatMap((e) => (e.type === "response.function_call_arguments.delta" ? [e.delta] : []));
    // The OpenAI-format provider's fragments pass on as they come; Ollama's call is whole in one chunk.
    expect(deltas.length).toBe(kind.path === "/api/chat" ? 1 : Math.ceil(ARGS.length / 8));
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      ...deltas.map(() => "response.function_call_arguments.delta"),
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(JSON.parse(deltas.join(""))).toEqual({ city: "Paris", unit: "C" });
    const done = events.find((e) => e.type === "response.function_call_arguments.done");
    expect(done).toMatchObject({ name: "get_weather", arguments: deltas.join(""), output_index: 0 });
    expect(final.output).toEqual([expect.objectContaining({ type: "function_call", name: "get_weather", arguments: deltas.join(""), status: "completed" })]);
    expect(await p.recordOf(final.id.replace(/^resp_/, ""))).toMatchObject({ outcome: "ok", stream: true, completion_tokens: 9 });
  });

  test.each(KINDS)("inference - text.format json_schema on $label reaches the provider as structured output", async (kind) => {
    kind.standin().set({ chunks: ['{"city":"Paris"}'] });
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
    const format = { type: "json_schema" as const, name: "place", schema, strict: true };
    const response = await p.client.responses.create({ model: kind.model, input: "A city?", text: { format } });
    expect([JSON.parse(response.output_text), response.text]).toEqual([{ city: "Paris" }, { format }]);
    if (kind.path === "/api/chat") expect(sentTo(kind).format).toEqual(schema);
    else expect(sentTo(kind).response_format).toEqual({ type: "json_schema", json_schema: { name: "place", schema, strict: true } });
  });

  test.each<[string, Record<string, unknown>, string]>([
    ["tool_choice required", { tool_choice: "required" }, "tool_choice"],
    ["parallel_tool_calls false", { parallel_tool_calls: false }, "parallel_tool_calls"],
    ["a strict function tool", { tools: [{ ...WEATHER, strict: true }] }, "tools"],
  ])("inference - %s on an Ollama model is 400 naming it, and Ollama is never asked", async (_name, change, param) => {
    const calls = providerCalls();
    const err = await openAiErrorOf(p.client.responses.create({ model: "llama3.2:1b", input: "Weather?", tools: [WEATHER], ...change } as never));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toMatchObject({ type: "invalid_request_error", param, code: "validation_failed" });
    expect(providerCalls()).toBe(calls);
  });

  test("inference - a model without tools is 400 naming tools, in the provider's words", async () => {
    p.vllm.withoutTools.add("Qwen/Qwen2.5-7B-Instruct");
    const err = await openAiErrorOf(p.client.responses.create({ model: "Qwen/Qwen2.5-7B-Instruct", input: "Weather?", tools: [WEATHER] }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toEqual({
      message: expect.stringMatching(/tool choice requires/),
      type: "invalid_request_error",
      param: "tools",
      code: "validation_failed",
    });
  });
});
