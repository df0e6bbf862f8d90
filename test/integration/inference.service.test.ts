/**
 * The inference service on a broker (no gateway) with two providers (the Ollama stand-in and an
 * OpenAI-compatible one named "vllm"), real PostgreSQL and Redis: the merged list, health per
 * provider, the list cache shared through Redis, and usage accounting of every inference.
 */
import { randomUUID } from "crypto";
import { Client } from "pg";
import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../moleculer.config";
import { signedCallerMeta } from "../../lib/caller-keys";
import { REDIS_URL, startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";
import { OllamaStandin, OpenAiStandin } from "../support/provider-standins";
import { acquireRedis, releaseRedis } from "../../lib/redis";

type Row = {
  id: string;
  client_id: string;
  model: string;
  provider: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  tokens_used: number;
  duration_ms: number;
  outcome: string;
  error_code: string | null;
  stream: boolean;
};

describe("inference - service with two providers", () => {
  let ollama: OllamaStandin;
  let vllm: OpenAiStandin;
  let platform: TestPlatform;
  let db: Client;
  const completed: Array<Record<string, unknown>> = [];
  const caller = { clientId: randomUUID(), role: "client", via: "jwt" as const };
  const call = <T = any>(action: string, params: Record<string, unknown> = {}) =>
    platform.broker.call<T, Record<string, unknown>>(action, params, { meta: signedCallerMeta(caller) });
  const row = (id: string) =>
    waitFor(async () => (await db.query<Row>("SELECT * FROM inference.inferences WHERE id = $1", [id])).rows[0], { message: `inference ${id} to be recorded` });
  const failureOf = async (work: Promise<unknown>) => {
    try {
      await work;
    } catch (err) {
      return err as { type: string; code: number; message: string; data: unknown };
    }
    throw new Error("expected the call to fail");
  };

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    vllm = await new OpenAiStandin().start();
    vllm.apiKey = "sk-test";
    platform = await startTestPlatform({
      services: ["inference"],
      env: {
        OLLAMA_URL: ollama.url,
        OPENAI_PROVIDERS: JSON.stringify([{ name: "vLLM", url: vllm.url, apiKey: "sk-test" }]),
        REDIS_URL,
        MODELS_CACHE_S: "1",
        INFERENCE_TIMEOUT_MS: "500",
      },
    });
    platform.broker.createService({
      name: "inference-listener",
      events: { "inference.completed": (ctx: { params: Record<string, unknown> }) => void completed.push(ctx.params) },
    });
    await platform.broker.waitForServices(["inference-listener"]);
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
    await ollama?.stop();
    await vllm?.stop();
  });

  beforeEach(() => {
    ollama.set({});
    vllm.set({});
  });

  test("inference - the list merges both providers; a shared name stays with Ollama, vLLM's copy is vllm/<name>", async () => {
    const { models } = await call<{ models: Array<{ name: string; provider: string; parameterSize: string }> }>("inference.list");
    expect(models.map((m) => [m.name, m.provider])).toEqual([
      ["llama3.2:1b", "ollama"],
      ["qwen2.5:0.5b", "ollama"],
      ["Qwen/Qwen2.5-7B-Instruct", "vllm"],
      ["vllm/llama3.2:1b", "vllm"],
    ]);
    expect(models.find((m) => m.name === "Qwen/Qwen2.5-7B-Instruct")!.parameterSize).toBe("7B");
  });

  test("inference - a prefixed name routes to its provider with the provider's own id", async () => {
    vllm.set({ chunks: ["from vllm"], promptTokens: 3, completionTokens: 2 });
    const ollamaChats = ollama.requests.filter((r) => r.path === "/api/chat").length;
    const result = await call("inference.infer", { model: "vllm/llama3.2:1b", prompt: "hi" });
    expect(result).toMatchObject({ model: "vllm/llama3.2:1b", response: "from vllm", tokensUsed: 5 });
    expect(vllm.lastRequest("/v1/chat/completions")!.body.model).toBe("llama3.2:1b");
    expect(ollama.requests.filter((r) => r.path === "/api/chat")).toHaveLength(ollamaChats);
  });

  test("inference - every inference is recorded with its outcome, tokens and duration, and announced", async () => {
    ollama.set({ promptTokens: 30, completionTokens: 12 });
    const ok = await call("inference.infer", { model: "llama3.2:1b", prompt: "hi" });
    expect(ok.tokensUsed).toBe(42);
    expect(Number.isInteger(ok.durationMs)).toBe(true);
    expect(await row(ok.id)).toMatchObject({
      client_id: caller.clientId,
      model: "llama3.2:1b",
      provider: "ollama",
      prompt_tokens: 30,
      completion_tokens: 12,
      tokens_used: 42,
      duration_ms: ok.durationMs,
      outcome: "ok",
      error_code: null,
      stream: false,
    });
    await waitFor(() => completed.find((e) => e.model === "llama3.2:1b" && e.tokensUsed === 42), { message: "inference.completed" });
    expect(completed.find((e) => e.tokensUsed === 42)).toEqual({
      model: "llama3.2:1b",
      provider: "ollama",
      tokensUsed: 42,
      durationMs: ok.durationMs,
      outcome: "ok",
    });

    const before = (await db.query("SELECT count(*)::int AS n FROM inference.inferences")).rows[0].n as number;
    ollama.set({ fail: { status: 500, message: "boom" } });
    expect((await failureOf(call("inference.infer", { model: "llama3.2:1b", prompt: "hi" }))).type).toBe("PROVIDER_ERROR");
    ollama.set({ delayMs: 2_000 });
    expect((await failureOf(call("inference.infer", { model: "llama3.2:1b", prompt: "hi" }))).type).toBe("PROVIDER_TIMEOUT");
    expect((await failureOf(call("inference.infer", { model: "no-such-model", prompt: "hi" }))).type).toBe("MODEL_NOT_FOUND");
    const rows = await waitFor(
      async () => {
        const { rows } = await db.query<Row>("SELECT * FROM inference.inferences ORDER BY created_at, id");
        return rows.length >= before + 3 ? rows : undefined;
      },
      { message: "the failed inferences to be recorded" },
    );
    const outcomes = rows.slice(-3).map((r) => [r.model, r.provider, r.outcome, r.error_code]);
    expect(outcomes).toEqual(
      expect.arrayContaining([
        ["llama3.2:1b", "ollama", "error", "PROVIDER_ERROR"],
        ["llama3.2:1b", "ollama", "timeout", "PROVIDER_TIMEOUT"],
        ["no-such-model", null, "error", "MODEL_NOT_FOUND"],
      ]),
    );
    await waitFor(() => completed.some((e) => e.outcome === "timeout"), { message: "a timeout inference.completed" });
  });

  test("inference - concurrent answers are each recorded once with their own tokens, and announced (accounting runs after the answer)", async () => {
    ollama.set({ promptTokens: 7, completionTokens: 4 });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => call("inference.infer", { model: "llama3.2:1b", prompt: `burst ${i}` })));
    const ids = answers.map((a) => a.id as string);
    expect(new Set(ids).size).toBe(20);
    const rows = await waitFor(
      async () => {
        const { rows } = await db.query<Row>("SELECT * FROM inference.inferences WHERE id = ANY($1::uuid[])", [ids]);
        return rows.length === ids.length ? rows : undefined;
      },
      { message: "every answered inference to be recorded" },
    );
    for (const r of rows) expect(r).toMatchObject({ client_id: caller.clientId, outcome: "ok", prompt_tokens: 7, completion_tokens: 4, tokens_used: 11 });
    await waitFor(() => completed.filter((e) => e.tokensUsed === 11).length >= ids.length, { message: "every inference.completed" });
    expect(completed.filter((e) => e.tokensUsed === 11)).toHaveLength(ids.length);
  });

  test("inference - health has one field per provider and follows each one", async () => {
    expect(await call("inference.health")).toEqual({ ollama: true, vllm: true });
    await vllm.stop();
    try {
      expect(await call("inference.health")).toEqual({ ollama: true, vllm: false });
    } finally {
      await vllm.start();
    }
    expect(await call("inference.health")).toEqual({ ollama: true, vllm: true });
  });

  test("inference - a provider that is down drops out of the list, and is back within the cache time once it answers", async () => {
    await vllm.stop();
    try {
      await waitFor(
        async () => {
          const { models } = await call<{ models: Array<{ provider: string }> }>("inference.list");
          return models.length > 0 && models.every((m) => m.provider === "ollama");
        },
        { message: "vllm to drop out of the list" },
      );
      // Its models cannot be looked up meanwhile: 503, not 404.
      const err = await failureOf(call("inference.infer", { model: "Qwen/Qwen2.5-7B-Instruct", prompt: "hi" }));
      expect([err.type, err.code]).toEqual(["SERVICE_UNAVAILABLE", 503]);
    } finally {
      await vllm.start();
    }
    await waitFor(
      async () => {
        const { models } = await call<{ models: Array<{ provider: string }> }>("inference.list");
        return models.some((m) => m.provider === "vllm");
      },
      { timeoutMs: 5_000, message: "vllm to come back in the list" },
    );
  });

  test("inference - the list is shared through Redis: another replica answers without asking the providers", async () => {
    const key = `${platform.namespace}:inference:models`;
    const redis = acquireRedis(REDIS_URL);
    const replica: ServiceBroker = createBroker(["inference"], { namespace: platform.namespace, nodeID: uniqueName("replica") }, platform.env);
    await replica.start();
    try {
      // A fresh entry (the cache lives 1 s here): the first replica fetches and stores the list.
      await waitFor(
        async () => {
          await call("inference.list");
          return (await redis.pttl(key)) > 700;
        },
        { message: "a fresh list in Redis" },
      );
      expect(JSON.parse((await redis.get(key))!).entries.length).toBeGreaterThan(0);
      const tagsBefore = ollama.requests.filter((r) => r.path === "/api/tags").length;
      const { models } = await replica.call<{ models: unknown[] }, Record<string, unknown>>("inference.list", {});
      expect(models.length).toBeGreaterThan(0);
      expect(ollama.requests.filter((r) => r.path === "/api/tags")).toHaveLength(tagsBefore);
    } finally {
      await replica.stop();
      await releaseRedis(REDIS_URL);
    }
  });
});
