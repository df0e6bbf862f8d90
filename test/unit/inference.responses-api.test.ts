/**
 * The Responses API translation (pure): what a request becomes (messages, tools, tool choice,
 * structured output), what is refused and by which param, and the response object (the stream's
 * events: inference.responses-stream.test.ts).
 */
import { readFileSync } from "fs";
import path from "path";
import type { Answer } from "../../services/inference/answers";
import { RESPONSES_FIELDS, V1_IGNORED_FIELDS } from "../../services/inference/openai-fields";
import { apiError } from "../../lib/errors";
import { inResponsesTerms, parseResponseCreate, responseOf } from "../../services/inference/responses-api";

const base = { model: "m", input: "hi" };
const faultsOf = (body: Record<string, unknown>): Array<{ field: string; message: string }> => {
  const faults = faultsOfOrNone(body);
  if (!faults.length) throw new Error("expected a validation error");
  return faults;
};
function faultsOfOrNone(body: Record<string, unknown>): Array<{ field: string; message: string }> {
  try {
    parseResponseCreate(body);
    return [];
  } catch (err) {
    return (err as { data: Array<{ field: string; message: string }> }).data;
  }
}
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
