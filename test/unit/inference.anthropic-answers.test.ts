/**
 * Anthropic's Messages API answers (pure): the Message shape, a stream's events in order (text and
 * tool_use blocks, input_json_delta), the error shape with Anthropic's statuses, and a provider's
 * refusal in the Messages API's field names.
 */
import { anthropicError } from "../../lib/anthropic-errors";
import { anthropicMessage, anthropicStreamFormat } from "../../services/inference/anthropic-answers";
import { inMessagesTerms } from "../../services/inference/anthropic-tools";
import type { Answer } from "../../services/inference/answers";
import type { ToolCallDelta } from "../../services/inference/providers";

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
