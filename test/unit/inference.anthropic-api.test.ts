/**
 * Anthropic's Messages API requests, translated (pure): what a request becomes (text, tool
 * history, tools, tool_choice, output_config), and what is refused by name. The answers:
 * inference.anthropic-answers.test.ts.
 */
import { readFileSync } from "fs";
import path from "path";
import { MESSAGES_IGNORED_FIELDS, parseMessages } from "../../services/inference/anthropic-api";

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
    [
      "output_config.format is structured output",
      { output_config: { format: { type: "json_schema", schema: { type: "object" } }, effort: null } },
      { responseFormat: { type: "json_schema", name: "output", schema: { type: "object" } } },
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
    ["output_config.effort", { output_config: { effort: "high" } }, ["output_config.effort"]],
    ["an output format that is not a schema", { output_config: { format: { type: "json_object" } } }, ["output_config.format"]],
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
    ["two tools of one name", { tools: [weather, weather] }, ["tools"]],
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
