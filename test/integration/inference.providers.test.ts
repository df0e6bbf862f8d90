/**
 * The provider adapters against stand-in servers speaking Ollama's and OpenAI's wire formats:
 * answers, option mapping, token counts, errors, slow answers, dropped connections, malformed
 * output, cancellation and connection reuse.
 */
import { OllamaProvider } from "../../services/inference/providers/ollama";
import { OpenAiProvider } from "../../services/inference/providers/openai";
import { ChatRequest, Provider, ProviderFailure, StreamChunk } from "../../services/inference/providers";
import { OllamaStandin, OpenAiStandin, standinEmbedding } from "../support/provider-standins";
import { waitFor } from "../support/platform";

type Kind = {
  label: string;
  standin: () => OllamaStandin | OpenAiStandin;
  adapter: (url: string) => Provider;
  chatPath: string;
  model: string;
  /** What the provider received, in common terms. */
  sent(body: any): { temperature: number; maxTokens: number; messages: Array<{ role: string; content: string }>; stream: boolean; [option: string]: unknown };
  embedPath: string;
};

const KINDS: Kind[] = [
  {
    label: "ollama",
    standin: () => new OllamaStandin(),
    adapter: (url) => new OllamaProvider(url),
    chatPath: "/api/chat",
    model: "llama3.2:1b",
    sent: (b) => ({
      temperature: b.options.temperature,
      maxTokens: b.options.num_predict,
      messages: b.messages,
      stream: b.stream,
      ...defined({ topP: b.options.top_p, stop: b.options.stop, seed: b.options.seed }),
    }),
    embedPath: "/api/embed",
  },
  {
    label: "openai",
    standin: () => new OpenAiStandin(),
    adapter: (url) => new OpenAiProvider("vllm", url),
    chatPath: "/v1/chat/completions",
    model: "Qwen/Qwen2.5-7B-Instruct",
    sent: (b) => ({
      temperature: b.temperature,
      maxTokens: b.max_tokens,
      messages: b.messages,
      stream: b.stream,
      ...defined({ topP: b.top_p, stop: b.stop, seed: b.seed, user: b.user }),
    }),
    embedPath: "/v1/embeddings",
  },
];

const never = () => new AbortController().signal;
const defined = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

function deadline(ms: number): AbortSignal {
  const controller = new AbortController();
  setTimeout(() => controller.abort(new ProviderFailure("timeout", "deadline")), ms).unref();
  return controller.signal;
}

async function failureOf(work: Promise<unknown>): Promise<ProviderFailure> {
  try {
    await work;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderFailure);
    return err as ProviderFailure;
  }
  throw new Error("expected a ProviderFailure");
}

async function collect(chunks: AsyncIterable<StreamChunk>): Promise<StreamChunk[]> {
  const out: StreamChunk[] = [];
  for await (const c of chunks) out.push(c);
  return out;
}

describe.each(KINDS)("inference - $label adapter", (kind) => {
  let standin: OllamaStandin | OpenAiStandin;
  let provider: Provider;
  const request = (extra: Partial<ChatRequest> = {}): ChatRequest => ({
    model: kind.model,
    messages: [{ role: "user", content: "Why is the sky blue?" }],
    temperature: 0.7,
    maxTokens: 1024,
    ...extra,
  });

  beforeAll(async () => {
    standin = await kind.standin().start();
    provider = kind.adapter(standin.url);
  });
  afterAll(() => standin.stop());
  beforeEach(() => standin.set({}));

  test(`inference - ${kind.label}: lists the provider's models`, async () => {
    const models = await provider.listModels(never());
    expect(models.map((m) => m.id)).toContain(kind.model);
    for (const m of models) {
      expect(m.parameterSize).toMatch(/^\d+(\.\d+)?B$/);
      expect(m.description).toContain(kind.label === "ollama" ? "served by ollama" : "served by vllm");
    }
  });

  test(`inference - ${kind.label}: a non-streamed answer with the provider's token counts and the options mapped`, async () => {
    standin.set({ chunks: ["The sky ", "scatters blue light."], promptTokens: 21, completionTokens: 7 });
    const messages = [
      { role: "system" as const, content: "Be brief." },
      { role: "user" as const, content: "Why is the sky blue?" },
    ];
    const answer = await provider.complete(request({ messages, temperature: 1.3, maxTokens: 64 }), never());
    expect(answer).toEqual({ text: "The sky scatters blue light.", promptTokens: 21, completionTokens: 7 });
    const sent = kind.sent(standin.lastRequest(kind.chatPath)!.body);
    expect(sent).toEqual({
      temperature: 1.3,
      maxTokens: 64,
      stream: false,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Why is the sky blue?" },
      ],
    });
  });

  test(`inference - ${kind.label}: a conversation, top_p, stop, seed (and user where the provider has one) are mapped`, async () => {
    const messages = [
      { role: "user" as const, content: "Hi" },
      { role: "assistant" as const, content: "Hello!" },
      { role: "user" as const, content: "Why is the sky blue?" },
    ];
    await provider.complete(request({ messages, topP: 0.9, stop: ["\n\n"], seed: 42, user: "u-1" }), never());
    const sent = kind.sent(standin.lastRequest(kind.chatPath)!.body);
    expect(sent).toMatchObject({ messages, topP: 0.9, stop: ["\n\n"], seed: 42 });
    // Ollama has no end-user field: it is not sent there.
    expect(sent.user).toBe(kind.label === "ollama" ? undefined : "u-1");
  });

  test(`inference - ${kind.label}: options not given are not sent (the provider's defaults apply)`, async () => {
    await provider.complete({ model: kind.model, messages: [{ role: "user", content: "hi" }] }, never());
    const sent = kind.sent(standin.lastRequest(kind.chatPath)!.body);
    expect([sent.temperature, sent.maxTokens, sent.topP, sent.stop, sent.seed]).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });

  test(`inference - ${kind.label}: an answer cut at the token limit says so, streamed or not`, async () => {
    standin.set({ truncated: true });
    expect(await provider.complete(request(), never())).toMatchObject({ finishReason: "length" });
    const chunks = await collect(await provider.stream(request(), never()));
    expect(chunks[chunks.length - 1]).toMatchObject({ type: "usage", finishReason: "length" });
  });

  test(`inference - ${kind.label}: embeddings, one vector per input in input order, with the prompt tokens`, async () => {
    standin.set({ promptTokens: 6 });
    const result = await provider.embed(kind.model, ["first", "second one"], never());
    expect(result).toEqual({ vectors: [standinEmbedding("first"), standinEmbedding("second one")], promptTokens: 6 });
    expect(standin.lastRequest(kind.embedPath)!.body).toMatchObject({ model: kind.model, input: ["first", "second one"] });
  });

  test(`inference - ${kind.label}: an embedding model the provider does not know is not_found`, async () => {
    const failure = await failureOf(provider.embed("no-such-model", ["x"], never()));
    expect(failure.kind).toBe("not_found");
  });

  test(`inference - ${kind.label}: a streamed answer arrives as deltas, then the token counts`, async () => {
    standin.set({ chunks: ["Rayleigh", " scattering", "."], promptTokens: 9, completionTokens: 3 });
    const chunks = await collect(await provider.stream(request(), never()));
    expect(chunks).toEqual([
      { type: "delta", text: "Rayleigh" },
      { type: "delta", text: " scattering" },
      { type: "delta", text: "." },
      { type: "usage", promptTokens: 9, completionTokens: 3 },
    ]);
    expect(kind.sent(standin.lastRequest(kind.chatPath)!.body).stream).toBe(true);
  });

  test(`inference - ${kind.label}: an HTTP error is a provider error carrying the status and the provider's message`, async () => {
    standin.set({ fail: { status: 500, message: "CUDA error: out of memory" } });
    for (const call of [provider.complete(request(), never()), provider.stream(request(), never())]) {
      const failure = await failureOf(call);
      expect(failure.kind).toBe("error");
      expect(failure.status).toBe(500);
      expect(failure.message).toContain("CUDA error: out of memory");
    }
  });

  test(`inference - ${kind.label}: a model the provider does not know is not_found`, async () => {
    const failure = await failureOf(provider.complete(request({ model: "no-such-model" }), never()));
    expect(failure.kind).toBe("not_found");
  });

  test(`inference - ${kind.label}: a slow answer is cut at the deadline, and the provider sees the connection close`, async () => {
    standin.set({ delayMs: 5_000 });
    const closedBefore = standin.closedEarly;
    const started = Date.now();
    const failure = await failureOf(provider.complete(request(), deadline(200)));
    expect(failure.kind).toBe("timeout");
    expect(Date.now() - started).toBeLessThan(2_000);
    await waitFor(() => standin.closedEarly > closedBefore, { message: "the stand-in to see the connection close" });
  });

  test(`inference - ${kind.label}: a stream cancelled mid-way closes the provider connection`, async () => {
    standin.set({ gated: true });
    const controller = new AbortController();
    const iterator = (await provider.stream(request(), controller.signal))[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toEqual({ type: "delta", text: "Hello" });
    const closedBefore = standin.closedEarly;
    controller.abort(new ProviderFailure("aborted", "client went away"));
    const failure = await failureOf(iterator.next());
    expect(failure.kind).toBe("aborted");
    await waitFor(() => standin.closedEarly > closedBefore, { message: "the stand-in to see the connection close" });
  });

  test(`inference - ${kind.label}: a connection dropped mid-stream is a provider error`, async () => {
    standin.set({ dropAfter: 2 });
    const seen: StreamChunk[] = [];
    const failure = await failureOf(
      (async () => {
        for await (const c of await provider.stream(request(), never())) seen.push(c);
      })(),
    );
    expect(failure.kind).toBe("error");
    expect(seen).toEqual([
      { type: "delta", text: "Hello" },
      { type: "delta", text: ", " },
    ]);
  });

  test(`inference - ${kind.label}: an error the provider reports mid-stream is a provider error with its message`, async () => {
    standin.set({ errorMidStream: "llama runner process has terminated" });
    const failure = await failureOf(collect(await provider.stream(request(), never())));
    expect(failure.kind).toBe("error");
    expect(failure.message).toContain("llama runner process has terminated");
  });

  test(`inference - ${kind.label}: a connection dropped mid-answer (non-streamed) is a provider error`, async () => {
    standin.set({ dropAfter: 0 });
    expect((await failureOf(provider.complete(request(), never()))).kind).toBe("error");
  });

  test(`inference - ${kind.label}: malformed output is a provider error, streamed or not`, async () => {
    standin.set({ malformed: true });
    expect((await failureOf(provider.complete(request(), never()))).message).toMatch(/malformed/);
    const stream = await provider.stream(request(), never());
    expect((await failureOf(collect(stream))).message).toMatch(/malformed/);
  });

  test(`inference - ${kind.label}: a provider that is not running is unavailable`, async () => {
    const gone = kind.standin();
    await gone.start();
    const url = gone.url;
    await gone.stop();
    const down = kind.adapter(url);
    for (const call of [down.complete(request(), never()), down.stream(request(), never()), down.listModels(never()), down.ping(never())])
      expect((await failureOf(call)).kind).toBe("unavailable");
  });

  test(`inference - ${kind.label}: answers reuse one kept-alive connection`, async () => {
    const fresh = kind.standin();
    await fresh.start();
    try {
      const adapter = kind.adapter(fresh.url);
      for (let i = 0; i < 5; i++) await adapter.complete(request(), never());
      await collect(await adapter.stream(request(), never()));
      await adapter.complete(request(), never());
      expect(fresh.requests).toHaveLength(7);
      expect(fresh.connections).toBe(1);
    } finally {
      await fresh.stop();
    }
  });

  test(`inference - ${kind.label}: ping answers while the provider runs`, async () => {
    await expect(provider.ping(never())).resolves.toBeUndefined();
  });
});

describe("inference - ollama adapter specifics", () => {
  test("inference - ollama: sizes and descriptions come from the tag details", async () => {
    const standin = await new OllamaStandin().start();
    try {
      const models = await new OllamaProvider(standin.url).listModels(never());
      expect(models).toEqual([
        { id: "llama3.2:1b", parameterSize: "1.2B", description: "llama model with 1.2B parameters (Q8_0, GGUF), served by ollama" },
        { id: "qwen2.5:0.5b", parameterSize: "0.5B", description: "qwen2 model with 0.5B parameters (Q4_K_M, GGUF), served by ollama" },
      ]);
    } finally {
      await standin.stop();
    }
  });

  test("inference - ollama: a prompt served from Ollama's cache (no prompt_eval_count) counts 0 prompt tokens", async () => {
    const standin = await new OllamaStandin().start();
    try {
      standin.set({ promptTokens: undefined as unknown as number, completionTokens: 5 });
      const answer = await new OllamaProvider(standin.url).complete(
        { model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], temperature: 0.7, maxTokens: 8 },
        never(),
      );
      expect(answer.promptTokens).toBe(0);
      expect(answer.completionTokens).toBe(5);
    } finally {
      await standin.stop();
    }
  });
});

describe("inference - openai adapter specifics", () => {
  let standin: OpenAiStandin;
  beforeAll(async () => {
    standin = await new OpenAiStandin().start();
  });
  afterAll(() => standin.stop());
  beforeEach(() => {
    standin.set({});
    standin.apiKey = undefined;
    standin.sendUsage = true;
  });
  const request: ChatRequest = { model: "llama3.2:1b", messages: [{ role: "user", content: "abcdefgh" }], temperature: 0.7, maxTokens: 16 };

  test("inference - openai: the API key is sent as a bearer token; a wrong one is a provider error", async () => {
    standin.apiKey = "sk-right";
    await expect(new OpenAiProvider("vllm", standin.url, "sk-right").complete(request, never())).resolves.toMatchObject({ text: "Hello, world!" });
    expect(standin.lastRequest("/v1/chat/completions")!.headers.authorization).toBe("Bearer sk-right");
    const failure = await failureOf(new OpenAiProvider("vllm", standin.url, "sk-wrong").listModels(never()));
    expect([failure.kind, failure.status]).toEqual(["error", 401]);
  });

  test("inference - openai: a base URL ending in /v1 works as well", async () => {
    await expect(new OpenAiProvider("vllm", `${standin.url}/v1`).listModels(never())).resolves.toHaveLength(2);
  });

  test("inference - openai: streams ask for usage, and a server that sends none gets an estimate", async () => {
    standin.sendUsage = false;
    standin.set({ chunks: ["abcd", "efgh"] });
    const chunks = await collect(await new OpenAiProvider("vllm", standin.url).stream(request, never()));
    expect(standin.lastRequest("/v1/chat/completions")!.body.stream_options).toEqual({ include_usage: true });
    expect(chunks[chunks.length - 1]).toEqual({ type: "usage", promptTokens: 2, completionTokens: 2 });
  });

  test("inference - openai: llama.cpp's meta.n_params gives the size", async () => {
    standin.models = [{ id: "model.gguf", owned_by: "llamacpp", meta: { n_params: 8_030_261_312 } }];
    try {
      const [m] = await new OpenAiProvider("llamacpp", standin.url).listModels(never());
      expect(m).toEqual({ id: "model.gguf", parameterSize: "8B", description: "Model with 8B parameters, served by llamacpp" });
    } finally {
      standin.models = new OpenAiStandin().models;
    }
  });
});
