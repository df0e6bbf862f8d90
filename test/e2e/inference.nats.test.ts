/**
 * Streaming across processes: the gateway here, the inference service in a child process, over
 * real NATS. Deltas must still be flushed one by one, and a client going away must still abort the
 * provider request (the gateway calls inference.abort on the serving node); the same for /v1
 * (OpenAI's chunks and Anthropic's Messages events).
 */
import Anthropic from "@anthropic-ai/sdk";
import { Client } from "pg";
import { http, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";
import { OllamaStandin } from "../support/provider-standins";
import { openAiClient } from "../support/inference-platform";
import { openSse } from "../support/sse";

describe("inference - streaming over NATS", () => {
  let ollama: OllamaStandin;
  let platform: NatsPlatform;
  let db: Client;
  let token = ""; // a JWT of a registered account: tokens of accounts that do not exist are refused
  const sse = () => openSse(`${platform.baseUrl}/api/models/infer`, { token, body: { model: "llama3.2:1b", prompt: "hi", stream: true } });

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startNatsPlatform({
      env: { OLLAMA_URL: ollama.url },
      processes: [["inference"]],
      local: ["api-gateway", "auth"],
      route: ["GET", "/api/models/health"],
    });
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `${uniqueName("nats")}@example.com`, name: "N", password: "password-123" },
    });
    token = reg.body.accessToken;
  });

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
    await ollama?.stop();
  });

  beforeEach(() => ollama.set({}));

  test("inference - over NATS: a non-streamed answer and the health answer", async () => {
    expect((await http(platform.baseUrl, "GET", "/api/models/health")).body).toEqual({ ollama: true });
    const res = await http(platform.baseUrl, "POST", "/api/models/infer", { token, body: { model: "llama3.2:1b", prompt: "hi" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ model: "llama3.2:1b", response: "Hello, world!", tokensUsed: 16 });
  });

  test("inference - over NATS: each delta reaches the client before the provider sends the next", async () => {
    ollama.set({ gated: true, chunks: ["a", "b", "c"] });
    const stream = await sse();
    expect(stream.response.headers.get("content-type")).toBe("text/event-stream");
    for (const expected of ["a", "b", "c"]) {
      expect((await stream.next()).delta).toBe(expected);
      ollama.release();
    }
    expect(await stream.next()).toMatchObject({ response: "abc", tokensUsed: 16, done: true });
    expect(await stream.next()).toBeUndefined();
  });

  test("inference - over NATS: a client that goes away aborts the provider request on the serving node", async () => {
    ollama.set({ gated: true });
    const closedBefore = ollama.closedEarly;
    const stream = await sse();
    const first = await stream.next();
    stream.close();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
    const row = await waitFor(async () => (await db.query("SELECT outcome FROM inference.inferences WHERE id = $1", [first.id])).rows[0], {
      message: "the aborted inference to be recorded",
    });
    expect(row.outcome).toBe("aborted");
  });

  test("inference - over NATS: /v1 streams chunk by chunk, and an abandoned /v1 stream aborts the provider request", async () => {
    ollama.set({ gated: true, chunks: ["a", "b", "c"] });
    const client = openAiClient(platform.baseUrl, token);
    const stream = await client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], stream: true });
    const chunks = stream[Symbol.asyncIterator]();
    for (const expected of ["a", "b"]) {
      expect((await chunks.next()).value?.choices[0].delta.content).toBe(expected);
      ollama.release();
    }
    const closedBefore = ollama.closedEarly;
    stream.controller.abort();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
  });

  test("inference - over NATS: /v1/messages streams event by event, and an abandoned one aborts the provider request", async () => {
    ollama.set({ gated: true, chunks: ["a", "b", "c"] });
    const client = new Anthropic({ baseURL: platform.baseUrl, apiKey: null, authToken: token, maxRetries: 0 });
    const stream = await client.messages.create({ model: "llama3.2:1b", max_tokens: 16, messages: [{ role: "user", content: "hi" }], stream: true });
    const events = stream[Symbol.asyncIterator]();
    const texts: string[] = [];
    while (texts.length < 2) {
      const event = (await events.next()).value as Anthropic.RawMessageStreamEvent;
      if (event.type !== "content_block_delta" || event.delta.type !== "text_delta") continue;
      texts.push(event.delta.text);
      ollama.release();
    }
    expect(texts).toEqual(["a", "b"]);
    const closedBefore = ollama.closedEarly;
    stream.controller.abort();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
  });
});
