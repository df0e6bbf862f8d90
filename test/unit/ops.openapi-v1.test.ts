/**
 * The OpenAPI document of the /v1 routes against the code that reads and writes them: every /v1
 * alias of the gateway is documented; a request body the document refuses is one the parser
 * refuses too (the document is not looser than the server), one the parser takes fits the
 * document; the answers the API writes (tool calls included) fit the documented schemas.
 */
import { V1_OPERATIONS } from "../../services/api-gateway/openapi/openai";
import { chatCompletion, parseChatCompletion } from "../../services/inference/openai-api";
import type { Answer } from "../../services/inference/answers";
import { parses, v1Document, v1Routes as v1Aliases } from "../support/v1-routes";

const { doc, fits, why } = v1Document();

const tool = {
  type: "function",
  function: { name: "get_weather", description: "The weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
};
const call = { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } };
const user = { role: "user", content: "Weather in Oslo?" };

describe("ops - OpenAPI document of the /v1 routes", () => {
  it("ops - every /v1 alias of the gateway is documented, its errors in its API's shape (Anthropic's on /v1/messages, with Anthropic's statuses)", () => {
    expect(v1Aliases().length).toBeGreaterThanOrEqual(3);
    for (const key of v1Aliases()) {
      const [method, path] = key.split(" ");
      const op = doc.paths[path]?.[method.toLowerCase()];
      expect(`${key}: ${op?.["x-undocumented"] ? "undocumented" : op ? "documented" : "missing"}`).toBe(`${key}: documented`);
      expect(V1_OPERATIONS[key]).toBeDefined();
      const shape = path === "/v1/messages" ? "AnthropicError" : "OpenAiError";
      const errors = Object.entries(op!.responses as Record<string, { content: Record<string, { schema: unknown }> }>).filter(
        ([status]) => Number(status) >= 400,
      );
      for (const [status, response] of errors)
        expect([key, status, response.content["application/json"].schema]).toEqual([key, status, { $ref: `#/components/schemas/${shape}` }]);
    }
    // Anthropic's API answers 529 where the platform answers 503, and 500 for a provider's 502.
    const messages = Object.keys(doc.paths["/v1/messages"].post.responses);
    expect(messages).toEqual(expect.arrayContaining(["500", "529"]));
    expect(messages).not.toContain("503");
    expect(messages).not.toContain("502");
  });

  const accepted: Array<[string, Record<string, unknown>]> = [
    ["a plain chat", { model: "m", messages: [user] }],
    ["a function tool and tool_choice auto", { model: "m", messages: [user], tools: [tool], tool_choice: "auto", parallel_tool_calls: false }],
    ["a named tool_choice", { model: "m", messages: [user], tools: [tool], tool_choice: { type: "function", function: { name: "get_weather" } } }],
    [
      "a tool call in the history and its result",
      {
        model: "m",
        messages: [user, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "call_1", content: "12 °C" }],
        tools: [tool],
      },
    ],
    [
      "response_format json_schema",
      { model: "m", messages: [user], response_format: { type: "json_schema", json_schema: { name: "weather", schema: { type: "object" }, strict: true } } },
    ],
    ["response_format json_object", { model: "m", messages: [user], response_format: { type: "json_object" } }],
  ];
  it.each(accepted)("ops - chat request with %s: the parser takes it and it fits the document", (_name, body) => {
    expect(parses(parseChatCompletion, body)).toBe(true);
    expect(fits("OpenAiChatCompletionRequest", body)).toBe(true);
  });

  const refused: Array<[string, Record<string, unknown>]> = [
    ["a tool of another type", { model: "m", messages: [user], tools: [{ type: "retrieval" }] }],
    ["a tool name with spaces", { model: "m", messages: [user], tools: [{ type: "function", function: { name: "get weather" } }] }],
    ["an unknown tool_choice", { model: "m", messages: [user], tools: [tool], tool_choice: "sometimes" }],
    ["a tool message without tool_call_id", { model: "m", messages: [user, { role: "assistant", tool_calls: [call] }, { role: "tool", content: "x" }] }],
    [
      "a tool call without arguments",
      { model: "m", messages: [user, { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f" } }] }] },
    ],
    ["response_format of an unknown type", { model: "m", messages: [user], response_format: { type: "xml" } }],
    ["json_schema without a schema", { model: "m", messages: [user], response_format: { type: "json_schema", json_schema: { name: "x" } } }],
    ["no messages", { model: "m", messages: [] }],
  ];
  it.each(refused)("ops - chat request with %s: the document and the parser both refuse it", (_name, body) => {
    expect(fits("OpenAiChatCompletionRequest", body)).toBe(false);
    expect(parses(parseChatCompletion, body)).toBe(false);
  });

  const answer: Answer = { id: "a1", model: "m", text: "", durationMs: 3, promptTokens: 5, completionTokens: 7 };
  const answers: Array<[string, Answer]> = [
    ["text", { ...answer, text: "Hello" }],
    ["tool calls only", { ...answer, toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }] }],
    ["text cut at the token limit", { ...answer, text: "Hel", finishReason: "length" }],
  ];
  it.each(answers)("ops - a chat completion of %s fits the document", (_name, a) => {
    const body = chatCompletion(a, 1_700_000_000);
    if (!fits("OpenAiChatCompletion", body)) throw new Error(why());
  });

  it("ops - a tool-call answer is documented with finish_reason tool_calls and its calls", () => {
    const body = chatCompletion(answers[1][1], 1);
    expect(body.choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { content: null, tool_calls: [call] } });
    const stream = doc.paths["/v1/chat/completions"].post.responses["200"] as { content: Record<string, unknown> };
    expect(Object.keys(stream.content)).toEqual(["application/json", "text/event-stream"]);
  });
});
