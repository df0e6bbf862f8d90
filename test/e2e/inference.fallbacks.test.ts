/**
 * Fallbacks through the gateway: MODEL_FALLBACKS (on /v1 and /api/models/infer) and the request's
 * own `models` list (on /v1). A provider error, a timeout or an outage before the first token
 * moves on; the answer names the model that answered and usage counts it; a failure after the
 * first token does not move on; a list cannot be used to multiply provider calls.
 */
import OpenAI from "openai";
import { InferencePlatform, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { http } from "../support/platform";

describe("inference - fallbacks", () => {
  let p: InferencePlatform;
  const hi = [{ role: "user" as const, content: "hi" }];
  const chats = () => p.ollama.requests.filter((r) => r.path === "/api/chat").length;

  beforeAll(async () => {
    p = await startInferencePlatform({
      MODEL_FALLBACKS: JSON.stringify({ "qwen2.5:0.5b": ["Qwen/Qwen2.5-7B-Instruct"] }),
      INFERENCE_TIMEOUT_MS: "400",
    });
  });
  afterAll(() => p?.stop());
  beforeEach(() => {
    p.ollama.set({});
    p.vllm.set({});
  });

  test("inference - MODEL_FALLBACKS: a provider error moves on; the answer and the usage name the model that answered", async () => {
    p.ollama.set({ fail: { status: 500, message: "model runner crashed" } });
    const answer = await p.client.chat.completions.create({ model: "qwen2.5:0.5b", messages: hi });
    expect([answer.model, answer.choices[0].message.content]).toEqual(["Qwen/Qwen2.5-7B-Instruct", "Hello, world!"]);
    expect(await p.recordOf(answer.id)).toMatchObject({ model: "Qwen/Qwen2.5-7B-Instruct", provider: "vllm", outcome: "ok", tokens_used: 16 });
    // The failed attempt is recorded too (before the answer's record), with no tokens.
    const failed = await p.db.query("SELECT * FROM inference.inferences WHERE model = 'qwen2.5:0.5b' ORDER BY created_at DESC LIMIT 1");
    expect(failed.rows[0]).toMatchObject({ outcome: "error", error_code: "PROVIDER_ERROR", tokens_used: 0 });
  });

  test("inference - MODEL_FALLBACKS applies to POST /api/models/infer as well (its shape unchanged)", async () => {
    p.ollama.set({ fail: { status: 503, message: "loading" } });
    const res = await http(p.platform.baseUrl, "POST", "/api/models/infer", { token: p.token, body: { model: "qwen2.5:0.5b", prompt: "hi" } });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["durationMs", "id", "model", "response", "tokensUsed"]);
    expect([res.body.model, res.body.tokensUsed]).toEqual(["Qwen/Qwen2.5-7B-Instruct", 16]);
  });

  test("inference - the request's models list: an outage (provider down) moves on, plain and streamed", async () => {
    await p.ollama.stop();
    try {
      const body = { model: "llama3.2:1b", models: ["vllm/llama3.2:1b"], messages: hi } as never;
      const answer = (await p.client.chat.completions.create(body)) as OpenAI.ChatCompletion;
      expect(answer.model).toBe("vllm/llama3.2:1b");
      const stream = await p.client.chat.completions.create({ ...(body as object), stream: true } as never);
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      for await (const c of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) chunks.push(c);
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello, world!");
      expect(new Set(chunks.map((c) => c.model))).toEqual(new Set(["vllm/llama3.2:1b"]));
    } finally {
      await p.ollama.start();
    }
  });

  test("inference - a timeout before the first token moves on", async () => {
    p.ollama.set({ delayMs: 2_000 });
    const answer = await p.client.chat.completions.create({ model: "qwen2.5:0.5b", messages: hi });
    expect(answer.model).toBe("Qwen/Qwen2.5-7B-Instruct");
    // Records are written in order: once the answer's is in, the timed-out attempt's is too.
    await p.recordOf(answer.id);
    const timedOut = await p.db.query("SELECT outcome FROM inference.inferences WHERE model = 'qwen2.5:0.5b' AND outcome = 'timeout'");
    expect(timedOut.rowCount).toBe(1);
  });

  test("inference - a stream failing before its first token moves on; one failing after it ends with an error instead", async () => {
    p.ollama.set({ dropAfter: 0 });
    const stream = await p.client.chat.completions.create({ model: "qwen2.5:0.5b", messages: hi, stream: true });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Hello, world!");
    p.ollama.set({ errorMidStream: "crashed after a token" });
    const vllmCalls = p.vllm.requests.length;
    const midway = await p.client.chat.completions.create({ model: "qwen2.5:0.5b", messages: hi, stream: true });
    const err = await openAiErrorOf(
      (async () => {
        for await (const c of midway) void c;
      })(),
    );
    expect(String(err.message)).toContain("crashed after a token");
    expect(p.vllm.requests.length).toBe(vllmCalls);
  });

  test("inference - when every model fails, the last failure is the answer", async () => {
    p.ollama.set({ fail: { status: 500, message: "down" } });
    p.vllm.set({ fail: { status: 500, message: "also down" } });
    const err = await openAiErrorOf(p.client.chat.completions.create({ model: "qwen2.5:0.5b", messages: hi }));
    expect([err.status, err.error]).toEqual([502, expect.objectContaining({ type: "server_error", code: "provider_error" })]);
    expect(String(err.message)).toContain("also down");
  });

  test("inference - an unknown model in the list is skipped like a failure", async () => {
    const answer = await p.client.chat.completions.create({ model: "no-such-model", models: ["llama3.2:1b"], messages: hi } as never);
    expect((answer as OpenAI.ChatCompletion).model).toBe("llama3.2:1b");
  });

  test("inference - a list cannot multiply provider calls: repeats are tried once, more than 6 models is 400", async () => {
    p.ollama.set({ fail: { status: 500, message: "down" } });
    const before = chats();
    const repeated = { model: "llama3.2:1b", models: ["llama3.2:1b", "llama3.2:1b", "llama3.2:1b"], messages: hi } as never;
    await openAiErrorOf(p.client.chat.completions.create(repeated));
    expect(chats()).toBe(before + 1);
    const tooMany = { model: "llama3.2:1b", models: Array.from({ length: 7 }, (_, i) => `m${i}`), messages: hi } as never;
    const err = await openAiErrorOf(p.client.chat.completions.create(tooMany));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toMatchObject({ param: "models" });
    expect(chats()).toBe(before + 1);
  });
});
