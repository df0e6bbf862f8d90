/**
 * Anthropic's Messages API translation (pure): what a request becomes (text, tool history, tools,
 * tool_choice), what is refused by name, the answer's Message shape, a stream's events in order,
 * and the error shape with Anthropic's statuses.
 */
import { anthropicError } from "../../lib/anthropic-errors";
import { readFileSync } from "fs";
import path from "path";
import { inMessagesTerms, MESSAGES_IGNORED_FIELDS, parseMessages } from "../../services/inference/anthropic-api";
import { anthropicMessage, anthropicStreamFormat } from "../../services/inference/anthropic-answers";
import type { Answer } from "../../services/inference/answers";
import type { ToolCallDelta } from "../../services/inference/providers";

const base = { model: "m", max_tokens: 64, messages: [{ role: "user", content: "hi" }] };
const faultsOf = (body: Record<string, unknown>): string[] => {
  try {
    parseMessages(body);
  } catch (err) {
    return ((err as { data: Array<{ field: string }> }).data ?? []).map((d) => d.field);
  }
  throw new Error("expected a validation error");
};
const weather = { name: "get_weather", description: "Weather of a city", input_schema: { type: "object", properties: { city: { type: "string" } } } };

describe("inference - Messages API requests", () => {
  test.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ["the minimum", {}, { model: "m", maxTokens: 64, stream: false, messages: [{ role: "user", content: "hi" }], temperature: undefined, stop: undefined }],
    [
      "a system string comes first",
      { system: "Be brief." },
      {
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "hi" },
        ],
      },
    ],
    [
      "system text blocks are joined (cache_control ignored)",
      {
        system: [
          { type: "text", text: "a" },
          { type: "text", text: "b", cache_control: { type: "ephemeral" } },
        ],
      },
      {
        messages: [
          { role: "system", content: "ab" },
          { role: "user", content: "hi" },
        ],
      },
    ],
    [
      "sampling, stop sequences, the end user, streaming",
      { temperature: 0.2, top_p: 0.5, stop_sequences: ["\n\n"], metadata: { user_id: "u-1" }, stream: true },
      { temperature: 0.2, topP: 0.5, stop: ["\n\n"], user: "u-1", stream: true },
    ],
    [
      "ignored and off fields pass",
      { cache_control: { type: "ephemeral" }, service_tier: "auto", thinking: { type: "disabled" }, mcp_servers: [], speed: "standard" },
      { model: "m" },
    ],
    ["nulls are absent", { temperature: null, system: null, tools: null, tool_choice: null, container: null }, { temperature: undefined }],
    [
      "tools and tool_choice any",
      { tools: [weather], tool_choice: { type: "any", disable_parallel_tool_use: true } },
      {
        tools: [{ name: "get_weather", description: "Weather of a city", parameters: weather.input_schema }],
        toolChoice: "required",
        parallelToolCalls: false,
      },
    ],
    ["tool_choice tool names one", { tools: [weather], tool_choice: { type: "tool", name: "get_weather" } }, { toolChoice: { name: "get_weather" } }],
    ["tool_choice none and auto", { tools: [weather], tool_choice: { type: "none" } }, { toolChoice: "none" }],
  ])("inference - messages: %s", (_name, change, expected) => {
    expect(parseMessages({ ...base, ...change })).toMatchObject(expected);
  });

  test("inference - messages: without tools, tool_choice auto asks for nothing", () => {
    const parsed = parseMessages({ ...base, tools: [], tool_choice: { type: "auto" } });
    expect([parsed.tools, parsed.toolChoice, parsed.parallelToolCalls]).toEqual([undefined, undefined, undefined]);
  });

  test("inference - messages: a tool conversation becomes assistant tool calls and tool messages, results before the user's text", () => {
    const parsed = parseMessages({
      ...base,
      tools: [weather],
      messages: [
        { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "get_weather", input: { city: "Lyon" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "text", text: "Thanks." },
            { type: "tool_result", tool_use_id: "toolu_1", content: "18 C" },
            { type: "tool_result", tool_use_id: "toolu_2", content: [{ type: "text", text: "no data" }], is_error: true },
          ],
        },
      ],
    });
    expect(parsed.messages).toEqual([
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Checking.",
        toolCalls: [
          { id: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}' },
          { id: "toolu_2", name: "get_weather", arguments: '{"city":"Lyon"}' },
        ],
      },
      { role: "tool", toolCallId: "toolu_1", content: "18 C" },
      { role: "tool", toolCallId: "toolu_2", content: "Error: no data" },
      { role: "user", content: "Thanks." },
    ]);
  });

  test("inference - messages: a user turn of tool results only adds no empty user message", () => {
    const messages = [
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "get_weather", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t1" }] },
    ];
    expect(parseMessages({ ...base, tools: [weather], messages }).messages).toEqual([
      { role: "assistant", content: "", toolCalls: [{ id: "t1", name: "get_weather", arguments: "{}" }] },
      { role: "tool", toolCallId: "t1", content: "" },
    ]);
  });

  test.each<[string, Record<string, unknown>, string[]]>([
    ["no max_tokens", { max_tokens: undefined }, ["max_tokens"]],
    ["max_tokens 0", { max_tokens: 0 }, ["max_tokens"]],
    ["no model", { model: undefined }, ["model"]],
    ["no messages", { messages: [] }, ["messages"]],
    ["temperature above 1", { temperature: 1.5 }, ["temperature"]],
    ["an unknown field, named first", { temperature: 3, frobnicate: 1 }, ["frobnicate", "temperature"]],
    ["OpenAI's stop field", { stop: ["x"] }, ["stop"]],
    ["thinking", { thinking: { type: "enabled", budget_tokens: 1024 } }, ["thinking"]],
    ["top_k", { top_k: 5 }, ["top_k"]],
    ["a container", { container: "c-1" }, ["container"]],
    ["MCP servers", { mcp_servers: [{ type: "url", url: "https://x", name: "x" }] }, ["mcp_servers"]],
    ["structured output", { output_config: { format: { type: "json_schema", schema: {} } } }, ["output_config"]],
    [
      "an image block",
      { messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "x" } }] }] },
      ["messages[0].content[0]"],
    ],
    ["a document block", { messages: [{ role: "user", content: [{ type: "document", source: {} }] }] }, ["messages[0].content[0]"]],
    ["a thinking block", { messages: [{ role: "assistant", content: [{ type: "thinking", thinking: "x", signature: "s" }] }] }, ["messages[0].content[0]"]],
    [
      "an unknown key in a text block",
      { messages: [{ role: "user", content: [{ type: "text", text: "x", colour: "red" }] }] },
      ["messages[0].content[0].colour"],
    ],
    [
      "citations",
      { messages: [{ role: "user", content: [{ type: "text", text: "x", citations: [{ type: "char_location" }] }] }] },
      ["messages[0].content[0].citations"],
    ],
    [
      "a tool_use in a user message",
      { messages: [{ role: "user", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }] },
      ["messages[0].content[0]"],
    ],
    ["a tool_use without input", { messages: [{ role: "assistant", content: [{ type: "tool_use", id: "t", name: "f" }] }] }, ["messages[0].content[0].input"]],
    [
      "an image in a tool result",
      {
        messages: [
          { role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image" }] }] },
        ],
      },
      ["messages[1].content[0].content[0]"],
    ],
    ["a role tool", { messages: [{ role: "tool", content: "x" }] }, ["messages[0].role"]],
    [
      "a tool_result answering no earlier call",
      { messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t9" }] }] },
      ["messages[0].content[0].tool_use_id"],
    ],
    ["a server tool", { tools: [{ type: "web_search_20250305", name: "web_search" }] }, ["tools[0].type", "tools[0].input_schema"]],
    ["a tool without input_schema", { tools: [{ name: "f" }] }, ["tools[0].input_schema"]],
    ["a tool with an unknown key", { tools: [{ ...weather, parameters: {} }] }, ["tools[0].parameters"]],
    ["a bad tool name", { tools: [{ ...weather, name: "get weather" }] }, ["tools[0].name"]],
    ["tool_choice any without tools", { tool_choice: { type: "any" } }, ["tool_choice"]],
    ["tool_choice naming an unknown tool", { tools: [weather], tool_choice: { type: "tool", name: "nope" } }, ["tool_choice.name"]],
    ["OpenAI's tool_choice string", { tools: [weather], tool_choice: "auto" }, ["tool_choice"]],
    ["an unknown metadata key", { metadata: { user_id: "u", tier: "gold" } }, ["metadata.tier"]],
    ["seventeen stop sequences", { stop_sequences: Array.from({ length: 17 }, (_, i) => `s${i}`) }, ["stop_sequences"]],
  ])("inference - messages: %s is refused naming the field", (_name, change, fields) => {
    expect(faultsOf({ ...base, ...change })).toEqual(fields);
  });

  test("inference - messages: docs/errors.md and docs/inference.md list every field accepted and ignored", () => {
    for (const doc of ["errors.md", "inference.md"]) {
      const text = readFileSync(path.join(__dirname, "../../docs", doc), "utf8");
      expect(MESSAGES_IGNORED_FIELDS.filter((f) => !text.includes(`\`${f}\``))).toEqual([]);
    }
  });

  test("inference - messages: a body that is not an object is refused", () => {
    expect(faultsOf([] as never)).toEqual(["(body)"]);
  });
});

const answer = (more: Partial<Answer> = {}): Answer => ({ id: "a1", model: "m", text: "Hello", promptTokens: 12, completionTokens: 4, durationMs: 5, ...more });

describe("inference - Messages API answers", () => {
  test("inference - messages: a text answer is a Message with one text block, end_turn and usage", () => {
    expect(anthropicMessage(answer())).toMatchObject({
      id: "msg_a1",
      type: "message",
      role: "assistant",
      model: "m",
      content: [{ type: "text", text: "Hello", citations: null }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 4 },
    });
  });

  test.each<[string, Partial<Answer>, string]>([
    ["cut at max_tokens", { finishReason: "length" }, "max_tokens"],
    ["ended to call tools", { finishReason: "tool_calls", toolCalls: [{ id: "c", name: "f", arguments: "{}" }] }, "tool_use"],
  ])("inference - messages: an answer %s stops with %s", (_name, more, reason) => {
    expect(anthropicMessage(answer(more)).stop_reason).toBe(reason);
  });

  test("inference - messages: tool calls are tool_use blocks with input objects, no empty text block", () => {
    const calls = [
      { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { id: "toolu_2", name: "get_weather", arguments: "" },
    ];
    expect(anthropicMessage(answer({ text: "", finishReason: "tool_calls", toolCalls: calls })).content).toEqual([
      { type: "tool_use", id: "toolu_call_1", name: "get_weather", input: { city: "Paris" }, caller: { type: "direct" } },
      { type: "tool_use", id: "toolu_2", name: "get_weather", input: {}, caller: { type: "direct" } },
    ]);
  });
});

/** A stream's events as `[event, data]`, checking that each event's name is its data's type. */
const eventsOf = (text: string) =>
  text
    .split("\n\n")
    .filter(Boolean)
    .map((chunk) => {
      const [, name, json] = /^event: (\w+)\ndata: (.*)$/s.exec(chunk)!;
      const data = JSON.parse(json);
      expect(data.type).toBe(name);
      return data;
    });

describe("inference - Messages API streams", () => {
  test("inference - messages: text deltas open one text block; done closes it and ends with message_delta and message_stop", () => {
    const f = anthropicStreamFormat();
    const events = eventsOf(f.delta("a1", "m", "Hel") + f.delta("a1", "m", "lo") + f.done(answer()));
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(events[0].message).toMatchObject({ id: "msg_a1", model: "m", role: "assistant", content: [], stop_reason: null });
    expect(events[1]).toEqual({ type: "content_block_start", index: 0, content_block: { type: "text", text: "", citations: null } });
    expect(events[3].delta).toEqual({ type: "text_delta", text: "lo" });
    expect(events[5]).toMatchObject({ delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 4, input_tokens: 12 } });
  });

  test("inference - messages: tool call parts become tool_use blocks with input_json_delta, after the text block closes", () => {
    const f = anthropicStreamFormat();
    const parts: ToolCallDelta[] = [
      { index: 0, id: "c0", name: "get_weather", arguments: "" },
      { index: 0, arguments: '{"city":' },
      { index: 0, arguments: '"Paris"}' },
      { index: 1, id: "c1", name: "get_time", arguments: "{}" },
    ];
    const calls = [
      { id: "c0", name: "get_weather", arguments: '{"city":"Paris"}' },
      { id: "c1", name: "get_time", arguments: "{}" },
    ];
    const text =
      f.delta("a1", "m", "Checking.") + parts.map((p) => f.toolCall("a1", "m", p)).join("") + f.done(answer({ finishReason: "tool_calls", toolCalls: calls }));
    const events = eventsOf(text).filter((e) => e.type !== "content_block_delta" || e.delta.type === "input_json_delta");
    expect(events.map((e) => [e.type, e.index ?? null, e.content_block?.type ?? e.delta?.partial_json ?? null])).toEqual([
      ["message_start", null, null],
      ["content_block_start", 0, "text"],
      ["content_block_stop", 0, null],
      ["content_block_start", 1, "tool_use"],
      ["content_block_delta", 1, '{"city":'],
      ["content_block_delta", 1, '"Paris"}'],
      ["content_block_stop", 1, null],
      ["content_block_start", 2, "tool_use"],
      ["content_block_delta", 2, "{}"],
      ["content_block_stop", 2, null],
      ["message_delta", null, null],
      ["message_stop", null, null],
    ]);
    expect(events[3].content_block).toEqual({ type: "tool_use", id: "toolu_c0", name: "get_weather", input: {}, caller: { type: "direct" } });
    expect(events[10].delta.stop_reason).toBe("tool_use");
  });

  test("inference - messages: an empty answer still has its text block; a failure is an error event", () => {
    const f = anthropicStreamFormat();
    expect(eventsOf(f.done(answer({ text: "" }))).map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const failed = eventsOf(anthropicStreamFormat().error({ code: "PROVIDER_ERROR", message: "model runner crashed", details: {} }));
    expect(failed).toEqual([{ type: "error", error: { type: "api_error", message: "model runner crashed" } }]);
  });
});

describe("inference - Anthropic's error shape", () => {
  test.each<[number, number, string]>([
    [400, 400, "invalid_request_error"],
    [401, 401, "authentication_error"],
    [403, 403, "permission_error"],
    [404, 404, "not_found_error"],
    [413, 413, "request_too_large"],
    [415, 415, "invalid_request_error"],
    [429, 429, "rate_limit_error"],
    [500, 500, "api_error"],
    [502, 500, "api_error"],
    [503, 529, "overloaded_error"],
    [504, 504, "timeout_error"],
  ])("inference - messages: the platform's %i is %i %s", (status, answered, type) => {
    expect(anthropicError(status, "m", null, "r-1")).toEqual({ status: answered, body: { type: "error", error: { type, message: "m" }, request_id: "r-1" } });
  });

  test("inference - messages: a provider's refusal of a chat field names the Messages API's field", () => {
    const refusal = [
      { field: "parallel_tool_calls", message: "Model cannot honour `parallel_tool_calls`: one call at most" },
      { field: "tool_choice", message: "x" },
    ];
    expect(inMessagesTerms(refusal)).toEqual([
      { field: "tool_choice.disable_parallel_tool_use", message: "Model cannot honour `tool_choice.disable_parallel_tool_use`: one call at most" },
      { field: "tool_choice", message: "x" },
    ]);
    expect(inMessagesTerms({ retryAfter: 3 })).toEqual({ retryAfter: 3 });
  });

  test("inference - messages: a validation error's message names its fields", () => {
    const { body } = anthropicError(400, "Request validation failed", [
      { field: "top_k", message: "top_k is not supported" },
      { field: "frobnicate", message: "not known" },
    ]);
    expect(body.error.message).toBe("top_k: top_k is not supported; frobnicate: not known");
  });
});
