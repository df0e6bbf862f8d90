/**
 * Tools and structured output, translated (pure): /v1 requests into the engine's options and
 * history, answers and stream chunks back into OpenAI's shapes, and the engine's requests into
 * Ollama's and OpenAI's wire fields and their answers back, with what each refuses by name.
 */
import { chatCompletion, openAiStreamFormat, parseChatCompletion } from "../../services/inference/openai-api";
import { ollamaChatFields, toolCallsOf as ollamaCalls } from "../../services/inference/providers/ollama-tools";
import { openAiChatFields, StreamedToolCalls, toolCallsOf as openAiCalls } from "../../services/inference/providers/openai-tools";
import { refusedField } from "../../services/inference/providers/tool-calls";
import { ChatRequest, ProviderFailure, promptText } from "../../services/inference/providers";

const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const weather = { type: "function", function: { name: "get_weather", description: "d", parameters: { type: "object" } } };
const history = [
  { role: "user", content: "weather?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
  { role: "tool", tool_call_id: "call_1", content: "18" },
];
/** The failure `work` throws. */
const failureOf = (work: () => unknown): ProviderFailure => {
  try {
    work();
  } catch (err) {
    return err as ProviderFailure;
  }
  throw new Error("expected a failure");
};
const fieldsOf = (work: () => unknown) => ((failureOf(work) as { data?: Array<{ field: string }> }).data ?? []).map((d) => d.field);

describe("inference - /v1 tool and format fields", () => {
  test.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      "tools with auto",
      { tools: [weather], tool_choice: "auto" },
      { tools: [{ name: "get_weather", description: "d", parameters: { type: "object" } }], toolChoice: "auto" },
    ],
    ["a named choice", { tools: [weather], tool_choice: { type: "function", function: { name: "get_weather" } } }, { toolChoice: { name: "get_weather" } }],
    ["parallel_tool_calls with tools", { tools: [weather], parallel_tool_calls: false }, { parallelToolCalls: false }],
    ["json_object", { response_format: { type: "json_object" } }, { responseFormat: { type: "json_object" } }],
    [
      "json_schema",
      { response_format: { type: "json_schema", json_schema: { name: "p", schema: { type: "object" }, strict: true } } },
      { responseFormat: { type: "json_schema", name: "p", schema: { type: "object" }, strict: true } },
    ],
  ])("inference - %s", (_name, change, expected) => {
    expect(parseChatCompletion({ ...base, ...change })).toMatchObject(expected);
  });

  test("inference - without tools, tool_choice none/auto and parallel_tool_calls have nothing to apply to; text is no format", () => {
    const parsed = parseChatCompletion({ ...base, tools: [], tool_choice: "auto", parallel_tool_calls: false, response_format: { type: "text" } });
    expect(["tools", "toolChoice", "parallelToolCalls", "responseFormat"].filter((k) => k in parsed)).toEqual([]);
  });

  test("inference - the history's tool calls and results", () => {
    expect(parseChatCompletion({ ...base, messages: history }).messages).toEqual([
      { role: "user", content: "weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
      { role: "tool", content: "18", toolCallId: "call_1" },
    ]);
  });

  test.each<[string, Record<string, unknown>, string[]]>([
    ["tools not a list", { tools: { a: 1 } }, ["tools"]],
    ["a custom tool", { tools: [{ type: "custom", custom: {} }] }, ["tools[0].type"]],
    ["a function without a name", { tools: [{ type: "function", function: {} }] }, ["tools[0].function.name"]],
    ["parameters not an object", { tools: [{ type: "function", function: { name: "f", parameters: "x" } }] }, ["tools[0].function.parameters"]],
    ["two tools of one name", { tools: [weather, weather] }, ["tools"]],
    ["required without tools", { tool_choice: "required" }, ["tool_choice"]],
    ["a choice of an unknown function", { tools: [weather], tool_choice: { type: "function", function: { name: "x" } } }, ["tool_choice"]],
    ["a choice of another shape", { tools: [weather], tool_choice: "any" }, ["tool_choice"]],
    ["parallel_tool_calls a string", { parallel_tool_calls: "no" }, ["parallel_tool_calls"]],
    ["an unknown format", { response_format: { type: "xml" } }, ["response_format.type"]],
    ["a schema name with spaces", { response_format: { type: "json_schema", json_schema: { name: "a b", schema: {} } } }, ["response_format.json_schema.name"]],
    ["a tool message without an earlier call", { messages: [{ role: "tool", tool_call_id: "c", content: "x" }] }, ["messages[0].tool_call_id"]],
    ["a tool message without an id", { messages: [{ role: "tool", content: "x" }] }, ["messages[0].tool_call_id"]],
    [
      "history arguments that are not a JSON object",
      { messages: [{ role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "[1" } }] }] },
      ["messages[0].tool_calls[0].function.arguments"],
    ],
    ["tool calls on a user message", { messages: [{ role: "user", content: "x", tool_calls: [] }] }, ["messages[0].tool_calls"]],
    ["a function message", { messages: [{ role: "function", name: "f", content: "x" }] }, ["messages[0].role"]],
  ])("inference - %s is refused naming the field", (_name, change, fields) => {
    expect(fieldsOf(() => parseChatCompletion({ ...base, ...change }))).toEqual(fields);
  });
});

describe("inference - /v1 answers with tool calls", () => {
  const answer = { id: "abc", model: "m", text: "", promptTokens: 3, completionTokens: 2, durationMs: 5 };
  const toolCalls = [{ id: "call_1", name: "f", arguments: '{"a":1}' }];

  test("inference - message.tool_calls, content null, finish_reason tool_calls", () => {
    expect(chatCompletion({ ...answer, toolCalls, finishReason: "tool_calls" }, 1).choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        refusal: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
      },
      logprobs: null,
      finish_reason: "tool_calls",
    });
  });

  test("inference - stream: a call's first delta carries the role, index, id, type and name; fragments only arguments", () => {
    const format = openAiStreamFormat(false, 1);
    const events = [
      format.toolCall("abc", "m", { index: 0, id: "call_1", name: "f", arguments: "" }),
      format.toolCall("abc", "m", { index: 0, arguments: '{"a":' }),
      format.toolCall("abc", "m", { index: 0, arguments: "1}" }),
      format.done({ ...answer, toolCalls, finishReason: "tool_calls" }),
    ].join("");
    const chunks = events
      .split("\n\n")
      .filter((e) => e && e !== "data: [DONE]")
      .map((e) => JSON.parse(e.slice(6)).choices[0]);
    expect(chunks.map((c) => c.delta)).toEqual([
      { role: "assistant", content: null, tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: "1}" } }] },
      {},
    ]);
    expect(chunks[3].finish_reason).toBe("tool_calls");
  });
});

const request = (change: Partial<ChatRequest> = {}): ChatRequest => ({
  model: "m",
  messages: [
    { role: "user", content: "weather?" },
    { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
    { role: "tool", content: "18", toolCallId: "call_1" },
  ],
  tools: [{ name: "get_weather", description: "d", parameters: { type: "object" } }],
  ...change,
});

describe("inference - Ollama's tools and format", () => {
  test("inference - tools as function specs, history arguments as objects, results naming their tool", () => {
    expect(ollamaChatFields(request())).toEqual({
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] },
        { role: "tool", content: "18", tool_name: "get_weather" },
      ],
      tools: [{ type: "function", function: { name: "get_weather", description: "d", parameters: { type: "object" } } }],
    });
  });

  test.each<[string, Partial<ChatRequest>, Record<string, unknown>]>([
    ["json_object is format json", { responseFormat: { type: "json_object" } }, { format: "json" }],
    ["json_schema is format: the schema", { responseFormat: { type: "json_schema", name: "p", schema: { type: "object" } } }, { format: { type: "object" } }],
  ])("inference - %s", (_name, change, expected) => {
    expect(ollamaChatFields(request(change))).toMatchObject(expected);
  });

  test("inference - tool_choice none shows the model no tools (so it cannot call one); the history stays", () => {
    const fields = ollamaChatFields(request({ toolChoice: "none", parallelToolCalls: false }));
    expect(fields).not.toHaveProperty("tools");
    expect(fields.messages).toHaveLength(3);
  });

  test.each<[string, Partial<ChatRequest>, string]>([
    ["required", { toolChoice: "required" }, "tool_choice"],
    ["a named function", { toolChoice: { name: "get_weather" } }, "tool_choice"],
    ["one call at most", { parallelToolCalls: false }, "parallel_tool_calls"],
    ["strict arguments", { tools: [{ name: "f", strict: true }] }, "tools"],
  ])("inference - %s is refused naming the field", (_name, change, param) => {
    expect(failureOf(() => ollamaChatFields(request(change)))).toMatchObject({ kind: "unsupported", param, status: 400 });
  });

  test("inference - answers' calls: object arguments as JSON text, ids kept or made; anything else a provider error", () => {
    const calls = ollamaCalls([{ function: { name: "f", arguments: { a: 1 } } }, { id: "call_x", function: { index: 1, name: "g", arguments: {} } }]);
    expect(calls).toEqual([
      { id: expect.stringMatching(/^call_[0-9a-f]{24}$/), name: "f", arguments: '{"a":1}' },
      { id: "call_x", name: "g", arguments: "{}" },
    ]);
    expect(failureOf(() => ollamaCalls([{ function: { name: "f", arguments: '{"a":' } }]))).toMatchObject({
      kind: "error",
      message: expect.stringMatching(/not valid JSON/),
    });
    expect(failureOf(() => ollamaCalls([{ function: { arguments: {} } }]))).toMatchObject({ kind: "error" });
    expect(ollamaCalls(undefined)).toEqual([]);
  });
});

describe("inference - OpenAI-compatible tools and format", () => {
  test("inference - passed through in OpenAI's shape", () => {
    const fields = openAiChatFields(
      request({ toolChoice: { name: "get_weather" }, parallelToolCalls: false, responseFormat: { type: "json_schema", name: "p", schema: {}, strict: true } }),
    );
    expect(JSON.parse(JSON.stringify(fields))).toEqual({
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
        },
        { role: "tool", content: "18", tool_call_id: "call_1" },
      ],
      tools: [{ type: "function", function: { name: "get_weather", description: "d", parameters: { type: "object" } } }],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      response_format: { type: "json_schema", json_schema: { name: "p", schema: {}, strict: true } },
    });
  });

  test("inference - whole calls: arguments checked as JSON, ids made where none", () => {
    expect(openAiCalls([{ type: "function", function: { name: "f", arguments: '{"a":1}' } }])).toEqual([
      { id: expect.stringMatching(/^call_/), name: "f", arguments: '{"a":1}' },
    ]);
    expect(failureOf(() => openAiCalls([{ id: "c", type: "function", function: { name: "f", arguments: '{"a":' } }]))).toMatchObject({
      kind: "error",
      message: 'Model provider returned arguments for tool "f" that are not valid JSON',
    });
  });

  test("inference - streamed calls: the first part of each carries id and name, fragments are joined and checked at the end", () => {
    const calls = new StreamedToolCalls();
    expect(calls.parts([{ index: 0, id: "c0", type: "function", function: { name: "f", arguments: "" } }])).toEqual([
      { index: 0, id: "c0", name: "f", arguments: "" },
    ]);
    expect(calls.parts([{ index: 1, function: { name: "g", arguments: "{}" } }])).toEqual([
      { index: 1, id: expect.stringMatching(/^call_/), name: "g", arguments: "{}" },
    ]);
    expect(calls.parts([{ index: 0, function: { arguments: '{"a":' } }])).toEqual([{ index: 0, arguments: '{"a":' }]);
    expect(failureOf(() => calls.check())).toMatchObject({ kind: "error", message: expect.stringMatching(/"f" that are not valid JSON/) });
    calls.parts([{ index: 0, function: { arguments: "1}" } }]);
    expect(() => calls.check()).not.toThrow();
    expect(calls.count).toBe(2);
    expect(failureOf(() => new StreamedToolCalls().parts([{ index: 0, function: { arguments: "{}" } }]))).toMatchObject({ kind: "error" });
  });
});

describe("inference - a provider's 400 about tools or a format", () => {
  const answered = (message: string, status = 400) => new ProviderFailure("error", `Model provider answered ${status}: ${message}`, status);
  test.each<[string, ProviderFailure, Partial<ChatRequest>, string | undefined]>([
    ["Ollama's model without tools", answered("registry.ollama.ai/library/x:latest does not support tools"), {}, "tools"],
    ["vLLM's auto choice, tool_choice not sent", answered('"auto" tool choice requires --enable-auto-tool-choice'), {}, "tools"],
    ["vLLM's auto choice, tool_choice sent", answered('"auto" tool choice requires --enable-auto-tool-choice'), { toolChoice: "auto" }, "tool_choice"],
    ["a schema refused", answered("Invalid schema for response_format 'p'"), { tools: undefined, responseFormat: { type: "json_object" } }, "response_format"],
    ["a 400 about something else", answered("max_tokens is too large"), {}, undefined],
    ["a 500 about tools", answered("tool parser crashed", 500), {}, undefined],
    ["a 400 about tools when none were sent", answered("tools are broken"), { tools: undefined }, undefined],
  ])("inference - %s", (_name, failure, change, param) => {
    const result = refusedField(failure, request(change)) as ProviderFailure;
    if (param) expect(result).toMatchObject({ kind: "unsupported", param, status: 400 });
    else expect(result).toBe(failure);
  });

  test("inference - the prompt estimate counts tool calls and tool definitions", () => {
    const text = promptText(request());
    expect(text).toContain('{\\"city\\":\\"Paris\\"}');
    expect(text).toContain('"description":"d"');
  });
});
