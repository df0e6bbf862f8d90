/**
 * Per-account inference rate limits across two gateway replicas (each gateway + auth +
 * inference in its own broker) sharing PostgreSQL and Redis: requests per minute and tokens per
 * minute count on both, on /v1 and /api/models/infer alike, with OpenAI's x-ratelimit-* headers,
 * Retry-After, and the openai client's RateLimitError (Anthropic's on /v1/messages); a refused request never reaches a provider.
 */
import Anthropic from "@anthropic-ai/sdk";
import Redis from "ioredis";
import OpenAI from "openai";
import { InferencePlatform, newAccount, openAiClient, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { clientIdOf, http, REDIS_URL, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

describe("inference - rate limits across two replicas", () => {
  let a: InferencePlatform;
  let b: TestPlatform;
  let redis: Redis;
  const hi = [{ role: "user" as const, content: "hi" }];
  const providerCalls = () => a.ollama.requests.length + a.vllm.requests.length;

  beforeAll(async () => {
    const limits = { REDIS_URL, INFERENCE_RPM: "4", INFERENCE_TPM: "40" };
    a = await startInferencePlatform(limits);
    // The second replica: same database, namespace (so the same Redis keys) and providers.
    b = await startTestPlatform({
      services: ["api-gateway", "auth", "inference"],
      databaseUrl: a.platform.databaseUrl,
      namespace: a.platform.namespace,
      dropDatabase: false,
      env: { ...limits, OLLAMA_URL: a.ollama.url, OPENAI_PROVIDERS: a.platform.env.OPENAI_PROVIDERS },
    });
    await waitForRoute(b.baseUrl, "GET", "/api/models/health");
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    redis?.disconnect();
    await b?.stop();
    await a?.stop();
  });

  beforeEach(() => {
    a.ollama.set({});
    a.vllm.set({});
  });

  test("inference - requests per minute count on both replicas and both APIs; over it, 429 with the headers", async () => {
    a.ollama.set({ promptTokens: 0, completionTokens: 0 }); // only the requests limit in play
    const account = await newAccount(a.platform.baseUrl);
    const [onA, onB] = [openAiClient(a.platform.baseUrl, account.apiKey), openAiClient(b.baseUrl, account.apiKey)];
    const remaining: Array<string | null> = [];
    for (const replica of [onA, onB, onA]) {
      const { response } = await replica.chat.completions.create({ model: "llama3.2:1b", messages: hi }).withResponse();
      expect(response.headers.get("x-ratelimit-limit-requests")).toBe("4");
      remaining.push(response.headers.get("x-ratelimit-remaining-requests"));
    }
    const viaInfer = await http(b.baseUrl, "POST", "/api/models/infer", { token: account.token, body: { model: "llama3.2:1b", prompt: "hi" } });
    expect([viaInfer.status, viaInfer.headers.get("x-ratelimit-remaining-requests")]).toEqual([200, "0"]);
    expect(remaining).toEqual(["3", "2", "1"]);

    const calls = providerCalls();
    const refused = await openAiErrorOf(onB.chat.completions.create({ model: "llama3.2:1b", messages: hi }));
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(refused.error).toMatchObject({ type: "requests", code: "rate_limit_exceeded", param: null });
    const retryAfter = Number(refused.headers?.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect([refused.headers?.get("x-ratelimit-limit-requests"), refused.headers?.get("x-ratelimit-remaining-requests")]).toEqual(["4", "0"]);

    const platformShape = await http(a.platform.baseUrl, "POST", "/api/models/infer", { token: account.token, body: { model: "llama3.2:1b", prompt: "hi" } });
    expect([platformShape.status, platformShape.body.error.code, platformShape.body.error.details.limit]).toEqual([429, "RATE_LIMITED", "requests"]);
    expect(platformShape.headers.get("retry-after")).toBeTruthy();
    expect(platformShape.body.error.details.headers).toBeUndefined(); // headers are headers, not details
    // Anthropic's Messages API counts in the same limits: its client's RateLimitError, Anthropic's shape.
    const anthropic = new Anthropic({ baseURL: b.baseUrl, apiKey: account.apiKey, maxRetries: 0 });
    const viaMessages = (await openAiErrorOf(anthropic.messages.create({ model: "llama3.2:1b", max_tokens: 8, messages: hi }))) as unknown as InstanceType<
      typeof Anthropic.APIError
    >;
    expect(viaMessages).toBeInstanceOf(Anthropic.RateLimitError);
    expect([viaMessages.type, viaMessages.headers?.get("retry-after"), viaMessages.headers?.get("x-ratelimit-remaining-requests")]).toEqual([
      "rate_limit_error",
      expect.stringMatching(/^\d+$/),
      "0",
    ]);
    expect(providerCalls()).toBe(calls);

    // Another account is not affected.
    const other = await newAccount(a.platform.baseUrl);
    await expect(openAiClient(b.baseUrl, other.apiKey).chat.completions.create({ model: "llama3.2:1b", messages: hi })).resolves.toBeDefined();
  });

  test("inference - tokens per minute: the tokens actually used, counted on either replica, refuse once the window is full", async () => {
    const account = await newAccount(a.platform.baseUrl);
    const key = `${a.platform.namespace}:inference-rate:tpm:${clientIdOf(account.token)}`;
    const [onA, onB] = [openAiClient(a.platform.baseUrl, account.apiKey), openAiClient(b.baseUrl, account.apiKey)];
    await onA.chat.completions.create({ model: "llama3.2:1b", messages: hi }); // 12 + 4 tokens
    const stream = await onB.chat.completions.create({ model: "Qwen/Qwen2.5-7B-Instruct", messages: hi, stream: true });
    for await (const chunk of stream) void chunk;
    // Tokens are charged off the response path: wait until both answers are counted.
    await waitFor(async () => Number(await redis.get(key)) === 32, { message: "32 tokens counted" });
    const { response } = await onB.chat.completions.create({ model: "llama3.2:1b", messages: hi }).withResponse();
    expect(response.headers.get("x-ratelimit-remaining-tokens")).toBe("8");
    await waitFor(async () => Number(await redis.get(key)) === 48, { message: "48 tokens counted" });
    const refused = await openAiErrorOf(onA.chat.completions.create({ model: "llama3.2:1b", messages: hi }));
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(refused.error).toMatchObject({ type: "tokens", code: "rate_limit_exceeded" });
    expect([refused.headers?.get("x-ratelimit-limit-tokens"), refused.headers?.get("x-ratelimit-remaining-tokens")]).toEqual(["40", "0"]);
  });

  test("inference - a request refused as invalid counts against no limit", async () => {
    const account = await newAccount(a.platform.baseUrl);
    const client = openAiClient(a.platform.baseUrl, account.apiKey);
    for (let i = 0; i < 6; i++) await openAiErrorOf(client.chat.completions.create({ model: "llama3.2:1b", messages: [] }));
    const { response } = await client.chat.completions.create({ model: "llama3.2:1b", messages: hi }).withResponse();
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("3");
  });
});
