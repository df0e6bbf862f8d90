/**
 * POST /v1/responses (OpenAI's Responses API, stateless) through the HTTP gateway, with the
 * official `openai` client as the real client, against the provider stand-ins: plain and streamed
 * answers (the events in order, finalResponse()), the settings reaching the provider, usage
 * records (abandoned streams too), rate-limit headers, and refusals in OpenAI's shape that change nothing.
 */
import OpenAI from "openai";
import { InferencePlatform, openAiErrorOf, providerKinds, resetStandins, sentTo, startInferencePlatform } from "../support/inference-platform";
import { http, waitFor } from "../support/platform";
import type { OllamaStandin, OpenAiStandin } from "../support/provider-standins";

describe("inference - the Responses API (/v1/responses) with the openai client", () => {
  let p: InferencePlatform;
  let ollama: OllamaStandin;
  let vllm: OpenAiStandin;
  let client: OpenAI;
  const recordOf = (responseId: string) => p.recordOf(responseId.replace(/^resp_/, ""));
  const rows = async () => (await p.db.query("SELECT count(*)::int AS n FROM inference.inferences")).rows[0].n as number;
  /** The record count once a fresh valid inference is recorded (records are written in order: earlier ones are in too). */
  const settled = async () => {
    const valid = await client.responses.create({ model: "llama3.2:1b", input: "hi" });
    await recordOf(valid.id);
    return rows();
  };
  const providerCalls = () => ollama.requests.length + vllm.requests.length;

  beforeAll(async () => {
    // A requests limit far above what the file sends: only so that the answers carry its headers.
    p = await startInferencePlatform({ INFERENCE_TIMEOUT_MS: "2000", INFERENCE_RPM: "100000" });
    ({ ollama, vllm, client } = p);
  });

  afterAll(() => p?.stop());

  beforeEach(() => resetStandins(p));

  const KINDS = providerKinds(() => p);

  test.each(KINDS)("inference - responses.create with a string input against $label: the response, its usage, one usage record", async (kind) => {
    const response = await client.responses.create({ model: kind.model, input: "Why is the sky blue?" });
    expect(response).toMatchObject({
      object: "response",
      status: "completed",
      model: kind.model,
      output: [{ type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hello, world!", annotations: [] }] }],
      usage: { input_tokens: 12, output_tokens: 4, total_tokens: 16 },
      store: false,
      error: null,
    });
    expect(response.id).toMatch(/^resp_/);
    expect(response.output_text).toBe("Hello, world!");
    expect(sentTo(kind).messages).toEqual([{ role: "user", content: "Why is the sky blue?" }]);
    expect(await recordOf(response.id)).toMatchObject({
      model: kind.model,
      outcome: "ok",
      stream: false,
      prompt_tokens: 12,
      completion_tokens: 4,
      tokens_used: 16,
    });
  });

  test("inference - instructions and a list of messages become the chat; the settings reach the provider and are echoed", async () => {
    const response = await client.responses.create({
      model: "Qwen/Qwen2.5-7B-Instruct",
      instructions: "Be brief.",
      input: [
        { role: "developer", content: "Answer in English." },
        {
          role: "user",
          content: [
            { type: "input_text", text: "Why is the sky " },
            { type: "input_text", text: "blue?" },
          ],
        },
        // an earlier response's output item, sent back as it came
        { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Scattering.", annotations: [] }] },
        { role: "user", content: "More?" },
      ],
      temperature: 0.2,
      top_p: 0.5,
      max_output_tokens: 64,
      user: "end-user-1",
    });
    const sent = vllm.lastRequest("/v1/chat/completions")!.body;
    expect(sent.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "system", content: "Answer in English." },
      { role: "user", content: "Why is the sky blue?" },
      { role: "assistant", content: "Scattering." },
      { role: "user", content: "More?" },
    ]);
    expect([sent.temperature, sent.top_p, sent.max_tokens, sent.user]).toEqual([0.2, 0.5, 64, "end-user-1"]);
    expect(response).toMatchObject({ instructions: "Be brief.", temperature: 0.2, top_p: 0.5, max_output_tokens: 64, tool_choice: "auto", tools: [] });
  });

  test("inference - an answer cut at max_output_tokens is incomplete", async () => {
    ollama.set({ truncated: true });
    const response = await client.responses.create({ model: "llama3.2:1b", input: "hi", max_output_tokens: 4 });
    expect([response.status, response.incomplete_details]).toEqual(["incomplete", { reason: "max_output_tokens" }]);
  });

  test.each(KINDS)("inference - a streamed response from $label: the events in order, finalResponse() is the joined deltas", async (kind) => {
    const stream = client.responses.stream({ model: kind.model, input: "hi" });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    stream.on("event", (e) => events.push(e));
    const final = await stream.finalResponse();
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...["Hello", ", ", "world", "!"].map(() => "response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const deltas = events.flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : []));
    expect(deltas.join("")).toBe("Hello, world!");
    expect(final.output_text).toBe(deltas.join(""));
    expect(final).toMatchObject({ status: "completed", model: kind.model, usage: { input_tokens: 12, output_tokens: 4, total_tokens: 16 } });
    expect(await recordOf(final.id)).toMatchObject({ model: kind.model, outcome: "ok", stream: true, tokens_used: 16 });
  });

  test("inference - responses.create with stream: true iterates the same events; the raw body is event/data lines", async () => {
    const stream = await client.responses.create({ model: "llama3.2:1b", input: "hi", stream: true });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect([types[0], types[types.length - 1]]).toEqual(["response.created", "response.completed"]);
    const raw = await http(p.platform.baseUrl, "POST", "/v1/responses", { token: p.apiKey, body: { model: "llama3.2:1b", input: "hi", stream: true } });
    expect([raw.status, raw.headers.get("content-type")]).toEqual([200, expect.stringContaining("text/event-stream")]);
    expect(raw.text.startsWith('event: response.created\ndata: {"type":"response.created","sequence_number":0,')).toBe(true);
  });

  test("inference - a stream the client abandons stops the provider call and counts the tokens generated until then", async () => {
    ollama.set({ gated: true });
    const closedBefore = ollama.closedEarly;
    const stream = await client.responses.create({ model: "llama3.2:1b", input: "hi", stream: true });
    const events = stream[Symbol.asyncIterator]();
    let created: OpenAI.Responses.ResponseStreamEvent | undefined;
    for (let e = await events.next(); !e.done; e = await events.next()) {
      created ??= e.value;
      if (e.value.type === "response.output_text.delta") break;
    }
    ollama.release(1);
    await waitFor(async () => (await events.next()).value?.type === "response.output_text.delta", { message: "the second delta" });
    stream.controller.abort();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
    const id = created!.type === "response.created" ? created!.response.id : "";
    expect(await recordOf(id)).toMatchObject({ outcome: "aborted", stream: true, completion_tokens: 2 });
  });

  test("inference - a provider failure mid-stream ends it with response.failed and an error the client throws", async () => {
    ollama.set({ errorMidStream: "model runner crashed" });
    const stream = client.responses.stream({ model: "llama3.2:1b", input: "hi" });
    const types: string[] = [];
    stream.on("event", (e) => types.push(e.type));
    const err = await openAiErrorOf(stream.finalResponse());
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err.message)).toContain("model runner crashed");
    expect(types.slice(-2)).toEqual(["response.output_text.delta", "response.failed"]);
  });

  test("inference - the answer carries the rate-limit headers, as chat completions' does", async () => {
    const res = await http(p.platform.baseUrl, "POST", "/v1/responses", { token: p.apiKey, body: { model: "llama3.2:1b", input: "hi" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-limit-requests")).toBe("100000");
    expect(Number(res.headers.get("x-ratelimit-remaining-requests"))).toBeLessThan(100000);
  });

  const BAD: Array<[string, Record<string, unknown>, string]> = [
    ["previous_response_id", { previous_response_id: "resp_123" }, "previous_response_id"],
    ["store: true", { store: true }, "store"],
    ["an unknown field", { top_k: 5 }, "top_k"],
    ["an image input", { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png", detail: "auto" }] }] }, "input[0].content[0]"],
    ["a reasoning item", { input: [{ type: "reasoning", id: "rs_1", summary: [] }] }, "input[0]"],
    ["a built-in tool", { tools: [{ type: "web_search" }] }, "tools[0].type"],
    ["temperature above 2", { temperature: 2.5 }, "temperature"],
  ];
  test.each(BAD)("inference - %s is BadRequestError in OpenAI's shape naming the param, and changes nothing", async (_name, change, param) => {
    const rowsBefore = await settled();
    const callsBefore = providerCalls();
    const err = await openAiErrorOf(client.responses.create({ model: "llama3.2:1b", input: "hi", ...change } as never));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toEqual({ message: expect.any(String), type: "invalid_request_error", param, code: "validation_failed" });
    expect(providerCalls()).toBe(callsBefore);
    expect(await settled()).toBe(rowsBefore + 1);
  });
});
