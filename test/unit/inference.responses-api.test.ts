/**
 * The Responses API translation (pure): what a request becomes (messages, tools, tool choice,
 * structured output), what is refused and by which param, the response object, and the stream's
 * events, read back through the official client's own SSE reader and response accumulator.
 */
import { readFileSync } from "fs";
import path from "path";
import { Stream } from "openai/core/streaming";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import type { Answer } from "../../services/inference/answers";
import { RESPONSES_FIELDS, V1_IGNORED_FIELDS } from "../../services/inference/openai-fields";
import { apiError } from "../../lib/errors";
import { inResponsesTerms, parseResponseCreate, responseOf } from "../../services/inference/responses-api";
import { responsesStreamFormat } from "../../services/inference/responses-stream";

const base = { model: "m", input: "hi" };
const faultsOf = (body: Record<string, unknown>): Array<{ field: string; message: string }> => {
  try {
    parseResponseCreate(body);
  } catch (err) {
    return (err as { data: Array<{ field: string; message: string }> }).data;
  }
  throw new Error("expected a validation error");
};
const fieldsOf = (body: Record<string, unknown>) => faultsOf(body).map((f) => f.field);

describe("inference - /v1/responses requests", () => {
  test.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ["a string input is one user message", {}, { model: "m", stream: false, messages: [{ role: "user", content: "hi" }], instructions: null }],
    [
      "instructions come first as a system message",
      { instructions: "Be brief." },
      {
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "hi" },
        ],
        instructions: "Be brief.",
      },
    ],
    [
      "message items: roles (developer is system), string or text-part content, type optional",
      {
        input: [
          { role: "developer", content: "d" },
          {
            type: "message",
            role: "user",
            content: [
              { type: "input_text", text: "a" },
              { type: "input_text", text: "b" },
            ],
          },
          { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "c", annotations: [] }] },
        ],
      },
      {
        messages: [
          { role: "system", content: "d" },
          { role: "user", content: "ab" },
          { role: "assistant", content: "c" },
        ],
      },
    ],
    [
      "function calls join the assistant message before them; their outputs are tool messages",
      {
        input: [
          { role: "user", content: "weather?" },
          { role: "assistant", content: "Looking." },
          { type: "function_call", id: "fc_1", call_id: "call_a", name: "weather", arguments: '{"city":"Oslo"}', status: "completed" },
          { type: "function_call", call_id: "call_b", name: "time", arguments: "{}" },
          { type: "function_call_output", call_id: "call_a", output: "rain" },
          { type: "function_call_output", call_id: "call_b", output: [{ type: "input_text", text: "noon" }] },
        ],
      },
      {
        messages: [
          { role: "user", content: "weather?" },
          {
            role: "assistant",
            content: "Looking.",
            toolCalls: [
              { id: "call_a", name: "weather", arguments: '{"city":"Oslo"}' },
              { id: "call_b", name: "time", arguments: "{}" },
            ],
          },
          { role: "tool", toolCallId: "call_a", content: "rain" },
          { role: "tool", toolCallId: "call_b", content: "noon" },
        ],
      },
    ],
    [
      "a function call with no assistant text before it is an assistant message of its own",
      { input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{}" }] },
      { messages: [{ role: "assistant", content: "", toolCalls: [{ id: "c", name: "f", arguments: "{}" }] }] },
    ],
    [
      "flat function tools, a named tool choice, parallel_tool_calls",
      {
        tools: [{ type: "function", name: "weather", description: "Weather of a city", parameters: { type: "object" }, strict: true }],
        tool_choice: { type: "function", name: "weather" },
        parallel_tool_calls: false,
      },
      {
        tools: [{ name: "weather", description: "Weather of a city", parameters: { type: "object" }, strict: true }],
        toolChoice: { name: "weather" },
        parallelToolCalls: false,
      },
    ],
    ["tool_choice required", { tools: [{ type: "function", name: "f", parameters: null, strict: null }], tool_choice: "required" }, { toolChoice: "required" }],
    ["tool_choice none without tools", { tool_choice: "none" }, { toolChoice: "none" }],
    ["text.format json_object", { text: { format: { type: "json_object" } } }, { responseFormat: { type: "json_object" } }],
    [
      "text.format json_schema",
      { text: { format: { type: "json_schema", name: "city", description: "A city", schema: { type: "object" }, strict: true } } },
      { responseFormat: { type: "json_schema", name: "city", description: "A city", schema: { type: "object" }, strict: true } },
    ],
    [
      "sampling settings",
      { temperature: 0.2, top_p: 0.5, max_output_tokens: 64, user: "u1", stream: true },
      { temperature: 0.2, topP: 0.5, maxTokens: 64, user: "u1", stream: true },
    ],
    ["models: fallbacks after model", { models: ["a", "b"] }, { model: "m", fallbacks: ["a", "b"] }],
    ["the stateless values pass", { store: false, previous_response_id: null, background: false, include: [], truncation: "disabled" }, { model: "m" }],
    ["reasoning effort alone is accepted", { reasoning: { effort: "low", summary: null } }, { model: "m" }],
  ])("inference - %s", (_name, change, expected) => {
    expect(parseResponseCreate({ ...base, ...change })).toMatchObject(expected);
  });

  test.each<[string, Record<string, unknown>, string]>([
    ["store: true", { store: true }, "store"],
    ["previous_response_id", { previous_response_id: "resp_1" }, "previous_response_id"],
    ["a conversation", { conversation: "conv_1" }, "conversation"],
    ["an unknown field", { top_k: 5 }, "top_k"],
    ["no input", { input: undefined }, "input"],
    ["an empty input list", { input: [] }, "input"],
    ["an image part", { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }, "input[0].content[0]"],
    ["a file part", { input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] }, "input[0].content[0]"],
    ["a reasoning item", { input: [{ type: "reasoning", id: "rs_1", summary: [] }] }, "input[0]"],
    ["an item reference", { input: [{ type: "item_reference", id: "msg_1" }] }, "input[0]"],
    ["a role the API does not have", { input: [{ role: "tool", content: "x" }] }, "input[0].role"],
    ["an unknown field of a message", { input: [{ role: "user", content: "x", name: "bob" }] }, "input[0].name"],
    ["a function call without call_id", { input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0].call_id"],
    ["a function call output without call_id", { input: [{ type: "function_call_output", output: "x" }] }, "input[0].call_id"],
    [
      "a function call output answering no earlier call",
      {
        input: [
          { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
          { type: "function_call_output", call_id: "c2", output: "x" },
        ],
      },
      "input[1].call_id",
    ],
    ["a built-in tool", { tools: [{ type: "web_search" }] }, "tools[0].type"],
    ["a tool in chat completions' nested shape", { tools: [{ type: "function", function: { name: "f" } }] }, "tools[0].function"],
    ["a tool name with spaces", { tools: [{ type: "function", name: "get weather" }] }, "tools[0].name"],
    ["tool_choice required without tools", { tool_choice: "required" }, "tool_choice"],
    ["tool_choice naming a tool not offered", { tools: [{ type: "function", name: "f" }], tool_choice: { type: "function", name: "g" } }, "tool_choice"],
    ["a built-in tool choice", { tools: [{ type: "function", name: "f" }], tool_choice: { type: "web_search_preview" } }, "tool_choice"],
    ["a json_schema format without schema", { text: { format: { type: "json_schema", name: "x" } } }, "text.format.schema"],
    ["an unknown format", { text: { format: { type: "grammar" } } }, "text.format"],
    ["reasoning summaries", { reasoning: { effort: "low", summary: "auto" } }, "reasoning"],
    ["include", { include: ["reasoning.encrypted_content"] }, "include"],
    ["truncation auto", { truncation: "auto" }, "truncation"],
    ["background", { background: true }, "background"],
    ["instructions as items", { instructions: [{ role: "system", content: "x" }] }, "instructions"],
    ["temperature above 2", { temperature: 3 }, "temperature"],
    ["max_output_tokens 0", { max_output_tokens: 0 }, "max_output_tokens"],
    ["stream that is not a boolean", { stream: "yes" }, "stream"],
  ])("inference - %s is refused naming %p", (_name, change, field) => {
    expect(fieldsOf({ ...base, ...change })).toContain(field);
  });

  test("inference - text.format text, and no text, ask for no format", () => {
    expect(parseResponseCreate({ ...base, text: { format: { type: "text" } } }).responseFormat).toBeUndefined();
    expect(parseResponseCreate(base).responseFormat).toBeUndefined();
  });

  test("inference - an unknown field is named first, in OpenAI's words", () => {
    try {
      parseResponseCreate({ ...base, top_k: 5, store: true });
      throw new Error("expected a refusal");
    } catch (err) {
      const e = err as { message: string; data: Array<{ field: string }> };
      expect(e.message).toBe("Unrecognized request argument supplied: top_k");
      expect(e.data.map((d) => d.field)).toEqual(["top_k", "store"]);
    }
  });

  test("inference - store: true and previous_response_id say the API is stateless", () => {
    for (const change of [{ store: true }, { previous_response_id: "resp_1" }]) expect(faultsOf({ ...base, ...change })[0].message).toMatch(/stateless/);
  });

  test("inference - every listed field is known; the ignored ones are accepted", () => {
    const unknown = [...RESPONSES_FIELDS].filter((f) =>
      faultsOfOrNone({ ...base, [f]: "x" }).some((d) => d.field === f && /not a known field/.test(d.message)),
    );
    expect(unknown).toEqual([]);
    const ignored = Object.fromEntries(V1_IGNORED_FIELDS.responses.map((f) => [f, null]));
    expect(parseResponseCreate({ ...base, ...ignored })).toMatchObject({ model: "m" });
  });

  test("inference - docs/errors.md lists every field /v1/responses accepts and ignores", () => {
    const doc = readFileSync(path.join(__dirname, "../../docs/errors.md"), "utf8");
    expect(V1_IGNORED_FIELDS.responses.filter((f) => !doc.includes(`\`${f}\``))).toEqual([]);
  });
});

function faultsOfOrNone(body: Record<string, unknown>) {
  try {
    parseResponseCreate(body);
    return [];
  } catch (err) {
    return (err as { data: Array<{ field: string; message: string }> }).data;
  }
}

const answer = (over: Partial<Answer> = {}): Answer => ({ id: "i1", model: "m", text: "Hello", promptTokens: 3, completionTokens: 2, durationMs: 5, ...over });
const request = (over: Record<string, unknown> = {}) => parseResponseCreate({ ...base, ...over });

describe("inference - /v1/responses answers", () => {
  test("inference - a provider's refusal of a field is named in this API's words; other errors are left as they are", () => {
    const refusal = (field: string) =>
      apiError("VALIDATION_FAILED", `Model "m" cannot honour \`${field}\`: no`, [{ field, message: `cannot honour \`${field}\`` }]);
    const renamed = inResponsesTerms(refusal("response_format")) as { type: string; message: string; data: unknown };
    expect([renamed.type, renamed.message, renamed.data]).toEqual([
      "VALIDATION_FAILED",
      'Model "m" cannot honour `text.format`: no',
      [{ field: "text.format", message: "cannot honour `text.format`" }],
    ]);
    expect((inResponsesTerms(refusal("messages")) as { data: Array<{ field: string }> }).data[0].field).toBe("input");
    const tools = refusal("tools");
    expect(inResponsesTerms(tools)).toBe(tools);
    const other = apiError("PROVIDER_ERROR", "boom", { provider: "ollama" });
    expect(inResponsesTerms(other)).toBe(other);
  });

  test("inference - a text answer: one completed message, usage, the request's settings echoed", () => {
    const r = request({ instructions: "Be brief.", temperature: 0.5, max_output_tokens: 9, metadata: { k: "v" } });
    expect(responseOf(answer(), r, 100)).toMatchObject({
      id: "resp_i1",
      object: "response",
      created_at: 100,
      status: "completed",
      error: null,
      incomplete_details: null,
      model: "m",
      output: [{ type: "message", id: "msg_i1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hello", annotations: [] }] }],
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
      instructions: "Be brief.",
      temperature: 0.5,
      top_p: null,
      max_output_tokens: 9,
      tools: [],
      tool_choice: "auto",
      text: { format: { type: "text" } },
      parallel_tool_calls: true,
      store: false,
      metadata: { k: "v" },
    });
  });

  test("inference - tool calls are function_call items after the text; only calls: no message", () => {
    const calls = [
      { id: "call_a", name: "weather", arguments: '{"city":"Oslo"}' },
      { id: "call_b", name: "time", arguments: "{}" },
    ];
    const r = request({ tools: [{ type: "function", name: "weather" }], tool_choice: "required" });
    const out = responseOf(answer({ text: "", toolCalls: calls, finishReason: "tool_calls" }), r, 1);
    expect(out.output).toEqual([
      { type: "function_call", id: "fc_i1_0", call_id: "call_a", name: "weather", arguments: '{"city":"Oslo"}', status: "completed" },
      { type: "function_call", id: "fc_i1_1", call_id: "call_b", name: "time", arguments: "{}", status: "completed" },
    ]);
    expect([out.status, out.tool_choice, out.tools]).toEqual([
      "completed",
      "required",
      [{ type: "function", name: "weather", description: null, parameters: null, strict: null }],
    ]);
    expect(responseOf(answer({ toolCalls: calls }), r, 1).output.map((o) => o.type)).toEqual(["message", "function_call", "function_call"]);
  });

  test("inference - an answer cut at the limit is incomplete, reason max_output_tokens", () => {
    const out = responseOf(answer({ finishReason: "length" }), request(), 1);
    expect([out.status, out.incomplete_details, out.output[0].status]).toEqual(["incomplete", { reason: "max_output_tokens" }, "incomplete"]);
  });

  test("inference - the structured output format is echoed", () => {
    const format = { type: "json_schema", name: "city", schema: { type: "object" }, strict: true };
    expect(responseOf(answer(), request({ text: { format } }), 1).text).toEqual({ format });
  });
});

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
