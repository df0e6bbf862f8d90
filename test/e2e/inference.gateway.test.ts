/**
 * Inference through the HTTP gateway (one process) against the Ollama stand-in: the public
 * endpoints, auth, the validation table, the error contract, and server-sent events — whole
 * streams, flushing, provider failures mid-stream, and a client going away.
 */
import { Client } from "pg";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";
import { OllamaStandin } from "../support/provider-standins";
import { openSse } from "../support/sse";

describe("inference - through the gateway", () => {
  let ollama: OllamaStandin;
  let platform: TestPlatform;
  let db: Client;
  let token: string;
  let apiKey: string;
  const infer = (body: unknown, headers: Record<string, string> = {}) => http(platform.baseUrl, "POST", "/api/models/infer", { body, token, headers });
  const rowCount = async () => (await db.query("SELECT count(*)::int AS n FROM inference.inferences")).rows[0].n as number;
  const row = (id: string) =>
    waitFor(async () => (await db.query("SELECT * FROM inference.inferences WHERE id = $1", [id])).rows[0], { message: `inference ${id} to be recorded` });
  const chats = () => ollama.requests.filter((r) => r.path === "/api/chat").length;
  const sse = (body: Record<string, unknown>) =>
    openSse(`${platform.baseUrl}/api/models/infer`, { token, body: { model: "llama3.2:1b", prompt: "hi", stream: true, ...body } });

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({ services: ["api-gateway", "auth", "inference"], env: { OLLAMA_URL: ollama.url, INFERENCE_TIMEOUT_MS: "1000" } });
    await waitForRoute(platform.baseUrl, "GET", "/api/models/health");
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `${uniqueName("inf")}@example.com`, name: "Inference", password: "password-123" },
    });
    token = reg.body.accessToken;
    apiKey = (await http(platform.baseUrl, "POST", "/api/auth/api-keys", { token })).body.apiKey;
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
    await ollama?.stop();
  });

  beforeEach(() => ollama.set({}));

  test("inference - GET /api/models is public and lists every model in the spec's shape", async () => {
    const res = await http(platform.baseUrl, "GET", "/api/models");
    expect(res.status).toBe(200);
    expect(res.body.models).toEqual([
      { name: "llama3.2:1b", provider: "ollama", parameterSize: "1.2B", description: expect.any(String) },
      { name: "qwen2.5:0.5b", provider: "ollama", parameterSize: "0.5B", description: expect.any(String) },
    ]);
  });

  test("inference - GET /api/models/health is public, exactly { ollama: true|false }, following the provider", async () => {
    expect((await http(platform.baseUrl, "GET", "/api/models/health")).body).toEqual({ ollama: true });
    await ollama.stop();
    try {
      const down = await http(platform.baseUrl, "GET", "/api/models/health");
      expect([down.status, down.body]).toEqual([200, { ollama: false }]);
    } finally {
      await ollama.start();
    }
    expect((await http(platform.baseUrl, "GET", "/api/models/health")).body).toEqual({ ollama: true });
  });

  test("inference - POST /api/models/infer needs credentials; a JWT or an API key will do", async () => {
    const none = await http(platform.baseUrl, "POST", "/api/models/infer", { body: { model: "llama3.2:1b", prompt: "hi" } });
    expect([none.status, none.body.error.code]).toEqual([401, "UNAUTHORIZED"]);
    const bad = await http(platform.baseUrl, "POST", "/api/models/infer", { body: { model: "llama3.2:1b", prompt: "hi" }, token: "not.a.jwt" });
    expect([bad.status, bad.body.error.code]).toEqual([401, "UNAUTHORIZED"]);
    const viaKey = await http(platform.baseUrl, "POST", "/api/models/infer", {
      body: { model: "llama3.2:1b", prompt: "hi" },
      headers: { "x-api-key": apiKey },
    });
    expect(viaKey.status).toBe(200);
    expect(await row(viaKey.body.id)).toMatchObject({ outcome: "ok" });
  });

  const invalid: Array<[string, unknown, string]> = [
    ["an empty body", {}, "model"],
    ["no prompt", { model: "llama3.2:1b" }, "prompt"],
    ["an empty model", { model: "", prompt: "hi" }, "model"],
    ["a blank model", { model: "   ", prompt: "hi" }, "model"],
    ["a model that is not a string", { model: 42, prompt: "hi" }, "model"],
    ["an empty prompt", { model: "llama3.2:1b", prompt: "" }, "prompt"],
    ["a null prompt", { model: "llama3.2:1b", prompt: null }, "prompt"],
    ["a system prompt that is not a string", { model: "llama3.2:1b", prompt: "hi", systemPrompt: 5 }, "systemPrompt"],
    ["temperature below 0", { model: "llama3.2:1b", prompt: "hi", temperature: -0.1 }, "temperature"],
    ["temperature above 2", { model: "llama3.2:1b", prompt: "hi", temperature: 2.01 }, "temperature"],
    ["temperature as a string", { model: "llama3.2:1b", prompt: "hi", temperature: "0.5" }, "temperature"],
    ["maxTokens 0", { model: "llama3.2:1b", prompt: "hi", maxTokens: 0 }, "maxTokens"],
    ["maxTokens above 8192", { model: "llama3.2:1b", prompt: "hi", maxTokens: 8193 }, "maxTokens"],
    ["maxTokens not an integer", { model: "llama3.2:1b", prompt: "hi", maxTokens: 1.5 }, "maxTokens"],
    ["maxTokens as a string", { model: "llama3.2:1b", prompt: "hi", maxTokens: "100" }, "maxTokens"],
    ["stream as a string", { model: "llama3.2:1b", prompt: "hi", stream: "true" }, "stream"],
    ["stream as a number", { model: "llama3.2:1b", prompt: "hi", stream: 1 }, "stream"],
  ];
  test.each(invalid)("inference - %s is 400 VALIDATION_FAILED naming the field, and changes nothing", async (_name, body, field) => {
    const [rowsBefore, chatsBefore] = [await rowCount(), chats()];
    const res = await infer(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    expect(chats()).toBe(chatsBefore);
    // Records are written in order: once a later valid inference is recorded, the refused one would be too.
    const valid = await infer({ model: "llama3.2:1b", prompt: "hi" });
    await row(valid.body.id);
    expect(await rowCount()).toBe(rowsBefore + 1);
  });

  test.each([
    ["malformed JSON", { rawBody: '{"model": "llama3.2:1b",', headers: { "content-type": "application/json" } }, 400, "INVALID_JSON"],
    ["a JSON array", { rawBody: "[]", headers: { "content-type": "application/json" } }, 400, "INVALID_JSON"],
    ["a body that is not JSON", { rawBody: "model=x", headers: { "content-type": "text/plain" } }, 415, "UNSUPPORTED_MEDIA_TYPE"],
  ])("inference - %s is refused before reaching the provider", async (_name, opts, status, code) => {
    const chatsBefore = chats();
    const res = await http(platform.baseUrl, "POST", "/api/models/infer", { ...opts, token });
    expect([res.status, res.body.error.code]).toEqual([status, code]);
    expect(chats()).toBe(chatsBefore);
  });

  test("inference - an answer in the spec's shape, with the defaults (0.7, 1024) sent to the provider", async () => {
    ollama.set({ chunks: ["Blue ", "light ", "scatters."], promptTokens: 17, completionTokens: 3 });
    const res = await infer({ model: "llama3.2:1b", prompt: "Why is the sky blue?" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      model: "llama3.2:1b",
      response: "Blue light scatters.",
      tokensUsed: 20,
      durationMs: expect.any(Number),
    });
    expect(Number.isInteger(res.body.durationMs)).toBe(true);
    expect(ollama.lastRequest("/api/chat")!.body.options).toEqual({ temperature: 0.7, num_predict: 1024 });
    expect(await row(res.body.id)).toMatchObject({ outcome: "ok", tokens_used: 20 });
  });

  test.each([
    ["temperature 0", { temperature: 0 }, { temperature: 0, num_predict: 1024 }],
    ["temperature 2", { temperature: 2 }, { temperature: 2, num_predict: 1024 }],
    ["maxTokens 1", { maxTokens: 1 }, { temperature: 0.7, num_predict: 1 }],
    ["maxTokens 8192", { maxTokens: 8192 }, { temperature: 0.7, num_predict: 8192 }],
  ])("inference - the bound %s is accepted and passed on", async (_name, extra, options) => {
    const res = await infer({ model: "llama3.2:1b", prompt: "hi", ...extra });
    expect(res.status).toBe(200);
    expect(ollama.lastRequest("/api/chat")!.body.options).toEqual(options);
  });

  test("inference - errors keep the contract and never show where the provider runs", async () => {
    const port = new URL(ollama.url).port;
    const unknown = await infer({ model: "no-such-model", prompt: "hi" });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, "MODEL_NOT_FOUND"]);

    ollama.set({ fail: { status: 500, message: `llama runner at 127.0.0.1:${port} crashed` } });
    const failed = await infer({ model: "llama3.2:1b", prompt: "hi" });
    expect([failed.status, failed.body.error.code]).toEqual([502, "PROVIDER_ERROR"]);
    expect(failed.body.error.message).toContain("crashed");

    ollama.set({ delayMs: 3_000 });
    const slow = await infer({ model: "llama3.2:1b", prompt: "hi" });
    expect([slow.status, slow.body.error.code]).toEqual([504, "PROVIDER_TIMEOUT"]);

    ollama.set({ malformed: true });
    const malformed = await infer({ model: "llama3.2:1b", prompt: "hi" });
    expect([malformed.status, malformed.body.error.code]).toEqual([502, "PROVIDER_ERROR"]);

    await ollama.stop();
    try {
      const down = await infer({ model: "llama3.2:1b", prompt: "hi" });
      expect([down.status, down.body.error.code]).toEqual([503, "SERVICE_UNAVAILABLE"]);
      const downStreamed = await infer({ model: "llama3.2:1b", prompt: "hi", stream: true });
      expect([downStreamed.status, downStreamed.body.error.code]).toEqual([503, "SERVICE_UNAVAILABLE"]);
      for (const res of [failed, slow, malformed, down]) {
        expect(res.text).not.toContain("127.0.0.1");
        expect(res.text).not.toContain(`:${port}`);
      }
    } finally {
      await ollama.start();
    }
  });

  test("inference - stream: a refusal before the first byte is a plain JSON error", async () => {
    const res = await infer({ model: "no-such-model", prompt: "hi", stream: true });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body.error.code).toBe("MODEL_NOT_FOUND");
  });

  test("inference - stream: server-sent events, one per delta, then the whole result with done", async () => {
    ollama.set({ chunks: ["Ray", "leigh", " scattering"], promptTokens: 8, completionTokens: 3 });
    const stream = await sse({ systemPrompt: "Be brief." });
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toBe("text/event-stream");
    expect(stream.response.headers.get("cache-control")).toBe("no-cache");
    expect(stream.response.headers.get("x-accel-buffering")).toBe("no");
    expect(stream.response.headers.get("x-request-id")).toBeTruthy();
    const events = await stream.rest();
    const id = events[0].id;
    expect(events).toEqual([
      { id, model: "llama3.2:1b", delta: "Ray" },
      { id, model: "llama3.2:1b", delta: "leigh" },
      { id, model: "llama3.2:1b", delta: " scattering" },
      { id, model: "llama3.2:1b", response: "Rayleigh scattering", tokensUsed: 11, durationMs: expect.any(Number), done: true },
    ]);
    expect(Number.isInteger(events[3].durationMs)).toBe(true);
    expect(ollama.lastRequest("/api/chat")!.body.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(await row(id)).toMatchObject({ outcome: "ok", stream: true, tokens_used: 11, duration_ms: events[3].durationMs });
  });

  test("inference - stream: each delta reaches the client before the provider sends the next (no buffering)", async () => {
    ollama.set({ gated: true, chunks: ["one", "two", "three"] });
    const stream = await sse({});
    expect((await stream.next()).delta).toBe("one");
    ollama.release();
    expect((await stream.next()).delta).toBe("two");
    ollama.release();
    expect((await stream.next()).delta).toBe("three");
    ollama.release();
    expect(await stream.next()).toMatchObject({ response: "onetwothree", done: true });
    expect(await stream.next()).toBeUndefined();
  });

  test("inference - stream: a provider failing mid-stream ends it with an error event", async () => {
    ollama.set({ dropAfter: 2 });
    const stream = await sse({});
    const events = await stream.rest();
    expect(events.slice(0, 2).map((e) => e.delta)).toEqual(["Hello", ", "]);
    expect(events[2]).toEqual({ error: { code: "PROVIDER_ERROR", message: expect.any(String), details: { provider: "ollama" } } });
    expect(events).toHaveLength(3);
    expect(await row(events[0].id)).toMatchObject({ outcome: "error", error_code: "PROVIDER_ERROR", stream: true });
  });

  test("inference - stream: a provider going silent ends it with PROVIDER_TIMEOUT", async () => {
    ollama.set({ gated: true });
    const stream = await sse({});
    expect((await stream.next()).delta).toBe("Hello");
    expect(await stream.next()).toMatchObject({ error: { code: "PROVIDER_TIMEOUT" } });
    expect(await stream.next()).toBeUndefined();
  });

  test("inference - stream: a client that goes away aborts the provider request", async () => {
    ollama.set({ gated: true });
    const closedBefore = ollama.closedEarly;
    const stream = await sse({});
    const first = await stream.next();
    stream.close();
    await waitFor(() => ollama.closedEarly > closedBefore, { message: "the stand-in to see its connection close" });
    expect(await row(first.id)).toMatchObject({ outcome: "aborted", error_code: null, stream: true });
  });
});
