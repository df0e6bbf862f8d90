/**
 * The OpenAPI document of POST /v1/responses (OpenAI's Responses API) and POST /v1/messages
 * (Anthropic's Messages API) against the code that reads and writes them: a body the document
 * refuses, the parser refuses too; one the parser takes fits the document; the answers and
 * errors the API writes (tool calls included) fit the documented schemas.
 */
import { anthropicError } from "../../lib/anthropic-errors";
import { anthropicMessage } from "../../services/inference/anthropic-answers";
import { parseMessages } from "../../services/inference/anthropic-api";
import type { Answer } from "../../services/inference/answers";
import { parseResponseCreate, responseOf } from "../../services/inference/responses-api";
import { parses, v1Document } from "../support/v1-routes";

const { fits, why } = v1Document();
const answer: Answer = { id: "a1", model: "m", text: "", durationMs: 3, promptTokens: 5, completionTokens: 7 };
const calls = [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }];
const ANSWERS: Array<[string, Answer]> = [
  ["text", { ...answer, text: "Hello" }],
  ["tool calls only", { ...answer, toolCalls: calls, finishReason: "tool_calls" }],
  ["text and a tool call", { ...answer, text: "Let me look.", toolCalls: calls }],
  ["text cut at the token limit", { ...answer, text: "Hel", finishReason: "length" }],
];

type Table = Array<[string, Record<string, unknown>]>;

/** Each accepted body is taken by the parser and fits `schema`; each refused one fits neither. */
function agreement(schema: string, parse: (body: unknown) => unknown, accepted: Table, refused: Table) {
  it.each(accepted)(`ops - ${schema}: %s is taken by the parser and fits the document`, (_name, body) => {
    expect(parses(parse, body)).toBe(true);
    if (!fits(schema, body)) throw new Error(why());
  });
  it.each(refused)(`ops - ${schema}: %s is refused by the document and the parser`, (_name, body) => {
    expect(fits(schema, body)).toBe(false);
    expect(parses(parse, body)).toBe(false);
  });
}

describe("ops - OpenAPI document of /v1/responses", () => {
  const tool = { type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } };
  const m = { model: "m" };
  agreement(
    "OpenAiResponseCreateRequest",
    parseResponseCreate,
    [
      ["a string input", { ...m, input: "Hi", instructions: "Be brief" }],
      [
        "a function tool, tool_choice and json_schema format",
        {
          ...m,
          input: "Hi",
          tools: [tool],
          tool_choice: { type: "function", name: "get_weather" },
          text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true } },
        },
      ],
      [
        "a function call and its output in the input",
        {
          ...m,
          tools: [tool],
          input: [
            { role: "user", content: "Weather?" },
            { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}" },
            { type: "function_call_output", call_id: "c1", output: "12 °C" },
          ],
        },
      ],
    ],
    [
      ["no input", { ...m }],
      ["store: true", { ...m, input: "Hi", store: true }],
      ["a tool of another type", { ...m, input: "Hi", tools: [{ type: "web_search" }] }],
      ["an unknown tool_choice", { ...m, input: "Hi", tools: [tool], tool_choice: "sometimes" }],
      ["a json_schema format without a schema", { ...m, input: "Hi", text: { format: { type: "json_schema", name: "w" } } }],
      ["a function_call_output without output", { ...m, input: [{ type: "function_call_output", call_id: "c1" }] }],
    ],
  );

  it.each(ANSWERS)("ops - a response of %s fits the document", (_name, a) => {
    const request = parseResponseCreate({ model: "m", input: "Hi", tools: [tool] });
    if (!fits("OpenAiResponse", responseOf(a, request, 1_700_000_000))) throw new Error(why());
  });
});

describe("ops - OpenAPI document of /v1/messages", () => {
  const tool = { name: "get_weather", description: "The weather", input_schema: { type: "object", properties: { city: { type: "string" } } } };
  const m = { model: "m", max_tokens: 64 };
  const ask = { role: "user", content: "Weather in Oslo?" };
  agreement(
    "AnthropicMessageCreateRequest",
    parseMessages,
    [
      ["a plain message and a system prompt", { ...m, system: "Be brief", messages: [ask] }],
      [
        "a tool, tool_choice any and output_config",
        { ...m, messages: [ask], tools: [tool], tool_choice: { type: "any" }, output_config: { format: { type: "json_schema", schema: { type: "object" } } } },
      ],
      [
        "a tool_use and its tool_result",
        {
          ...m,
          tools: [tool],
          messages: [
            ask,
            { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }] },
            { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "12 °C" }] },
          ],
        },
      ],
    ],
    [
      ["no max_tokens", { model: "m", messages: [ask] }],
      ["no messages", { ...m, messages: [] }],
      ["a tool_choice of an unknown type", { ...m, messages: [ask], tools: [tool], tool_choice: { type: "sometimes" } }],
      ["a tool without input_schema", { ...m, messages: [ask], tools: [{ name: "get_weather" }] }],
      ["a tool_use without input", { ...m, messages: [ask, { role: "assistant", content: [{ type: "tool_use", id: "t", name: "f" }] }] }],
      ["temperature above 1", { ...m, messages: [ask], temperature: 1.5 }],
    ],
  );

  it.each(ANSWERS)("ops - a message of %s fits the document", (_name, a) => {
    if (!fits("AnthropicMessage", anthropicMessage(a))) throw new Error(why());
  });

  it.each([400, 401, 403, 404, 413, 429, 500, 502, 503, 504])("ops - the platform's %i as Anthropic's error fits the document", (status) => {
    const { body } = anthropicError(status, "refused", [{ field: "temperature", message: "must be a number from 0 to 1" }], "req-1");
    if (!fits("AnthropicError", body)) throw new Error(why());
  });
});
