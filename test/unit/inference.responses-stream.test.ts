/**
 * The Responses API's stream events (pure): what the engine's deltas, tool-call parts, end and
 * failures become, read back through the official client's own SSE reader and response
 * accumulator, so the events are checked as the client sees them.
 */
import { Stream } from "openai/core/streaming";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import type { Answer } from "../../services/inference/answers";
import { parseResponseCreate } from "../../services/inference/responses-api";
import { responsesStreamFormat } from "../../services/inference/responses-stream";

const answer = (over: Partial<Answer> = {}): Answer => ({ id: "i1", model: "m", text: "Hello", promptTokens: 3, completionTokens: 2, durationMs: 5, ...over });
const request = (over: Record<string, unknown> = {}) => parseResponseCreate({ model: "m", input: "hi", stream: true, ...over });
const CALLS = [
  { id: "call_a", name: "weather", arguments: '{"city":"Oslo"}' },
  { id: "call_b", name: "weather", arguments: '{"city":"Rome"}' },
];
const STARTS = ["response.created", "response.in_progress"];
const MESSAGE_OPENS = ["response.output_item.added", "response.content_part.added"];
const MESSAGE_CLOSES = ["response.output_text.done", "response.content_part.done", "response.output_item.done"];

/** The events as the official client reads them (its SSE reader), and the response it accumulates from them. */
async function readBack(sse: string) {
  const events: ResponseStreamEvent[] = [];
  const stream = Stream.fromSSEResponse<ResponseStreamEvent>(new Response(sse), new AbortController());
  let snapshot;
  let thrown: unknown;
  try {
    for await (const event of stream) {
      events.push(event);
      snapshot = accumulateResponse(event, snapshot);
    }
  } catch (err) {
    thrown = err;
  }
  return { events, types: events.map((e) => e.type), snapshot, thrown };
}

describe("inference - /v1/responses stream events", () => {
  test("inference - text deltas: created, in_progress, the message's events in order, completed with usage", async () => {
    const f = responsesStreamFormat(request({ stream: true }), 7);
    const sse = f.delta("i1", "m", "Hel") + f.delta("i1", "m", "") + f.delta("i1", "m", "lo") + f.done(answer());
    expect(sse.split("\n\n")[0]).toMatch(/^event: response\.created\ndata: \{"type":"response\.created","sequence_number":0,/);
    const { events, types, snapshot } = await readBack(sse);
    expect(types).toEqual([...STARTS, ...MESSAGE_OPENS, "response.output_text.delta", "response.output_text.delta", ...MESSAGE_CLOSES, "response.completed"]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.filter((e) => e.type === "response.output_text.delta").map((e) => ("delta" in e ? e.delta : ""))).toEqual(["Hel", "lo"]);
    expect(snapshot).toMatchObject({ id: "resp_i1", status: "completed", output_text: "Hello", usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } });
    expect(events[0]).toMatchObject({ response: { id: "resp_i1", status: "in_progress", output: [], created_at: 7 } });
  });

  test("inference - tool-call parts: a function_call item per call, argument deltas joined, arguments.done with the whole JSON", async () => {
    const f = responsesStreamFormat(request({ stream: true, tools: [{ type: "function", name: "weather" }] }), 7);
    const sse =
      f.delta("i1", "m", "Checking.") +
      f.toolCall("i1", "m", { index: 0, id: "call_a", name: "weather", arguments: '{"city":' }) +
      f.toolCall("i1", "m", { index: 0, arguments: '"Oslo"}' }) +
      f.toolCall("i1", "m", { index: 1, id: "call_b", name: "weather", arguments: '{"city":"Rome"}' }) +
      f.done(answer({ text: "Checking.", toolCalls: CALLS, finishReason: "tool_calls" }));
    const { events, types, snapshot } = await readBack(sse);
    expect(types).toEqual([
      ...STARTS,
      ...MESSAGE_OPENS,
      "response.output_text.delta",
      ...MESSAGE_CLOSES,
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const argsDone = events.filter((e) => e.type === "response.function_call_arguments.done");
    expect(argsDone.map((e) => ("arguments" in e ? [e.output_index, e.name, e.arguments] : []))).toEqual([
      [1, "weather", '{"city":"Oslo"}'],
      [2, "weather", '{"city":"Rome"}'],
    ]);
    expect(events[8]).toMatchObject({
      output_index: 1,
      item: { type: "function_call", id: "fc_i1_0", call_id: "call_a", name: "weather", arguments: "", status: "in_progress" },
    });
    expect(snapshot!.output).toEqual([
      expect.objectContaining({ type: "message", id: "msg_i1" }),
      { type: "function_call", id: "fc_i1_0", call_id: "call_a", name: "weather", arguments: '{"city":"Oslo"}', status: "completed" },
      { type: "function_call", id: "fc_i1_1", call_id: "call_b", name: "weather", arguments: '{"city":"Rome"}', status: "completed" },
    ]);
  });

  test("inference - a late part of a call already closed adds no event; the completed response carries the whole call", async () => {
    const f = responsesStreamFormat(request({ stream: true, tools: [{ type: "function", name: "weather" }] }), 1);
    const first =
      f.toolCall("i1", "m", { index: 0, id: "call_a", name: "weather", arguments: '{"city":"Oslo"' }) +
      f.toolCall("i1", "m", { index: 1, id: "call_b", name: "weather", arguments: CALLS[1].arguments });
    expect(f.toolCall("i1", "m", { index: 0, arguments: "}" })).toBe("");
    const { types, snapshot } = await readBack(first + f.done(answer({ text: "", toolCalls: CALLS, finishReason: "tool_calls" })));
    expect(types.filter((t) => t === "response.output_item.added")).toHaveLength(2);
    expect(snapshot!.output.map((o) => (o.type === "function_call" ? o.arguments : ""))).toEqual(CALLS.map((c) => c.arguments));
  });

  test("inference - an empty answer is still one message; a cut one ends with response.incomplete", async () => {
    const empty = responsesStreamFormat(request({ stream: true }), 1);
    const a = await readBack(empty.done(answer({ text: "" })));
    expect(a.types).toEqual([...STARTS, ...MESSAGE_OPENS, ...MESSAGE_CLOSES, "response.completed"]);
    const cut = responsesStreamFormat(request({ stream: true }), 1);
    const b = await readBack(cut.delta("i1", "m", "Hel") + cut.done(answer({ text: "Hel", finishReason: "length" })));
    expect(b.types.slice(-2)).toEqual(["response.output_item.done", "response.incomplete"]);
    expect(b.snapshot).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [{ status: "incomplete" }] });
  });

  test("inference - a failure mid-stream is response.failed then an error event, which the client throws", async () => {
    const f = responsesStreamFormat(request({ stream: true }), 1);
    const failure = { code: "PROVIDER_ERROR" as const, message: "model runner crashed", details: { provider: "ollama" } };
    const { types, snapshot, thrown } = await readBack(f.delta("i1", "m", "Hel") + f.error(failure));
    expect(types.slice(-1)).toEqual(["response.failed"]);
    expect(snapshot).toMatchObject({ id: "resp_i1", status: "failed", error: { code: "server_error", message: "model runner crashed" } });
    expect(thrown).toMatchObject({ error: { type: "server_error", code: "provider_error", message: "model runner crashed" } });
    const before = await readBack(responsesStreamFormat(request({ stream: true }), 1).error(failure));
    expect([before.types, (before.thrown as Error).message]).toEqual([[], expect.stringContaining("model runner crashed")]);
  });
});
