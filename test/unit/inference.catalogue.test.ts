import { parseOpenAiProviders } from "../../services/inference/settings";
import { mergeModels, ModelCatalogue, Snapshot, SnapshotStore } from "../../services/inference/catalogue";
import { outcomeOf, publicFailure, scrub } from "../../services/inference/errors";
import { Provider, ProviderFailure, ProviderModel, StreamChunk } from "../../services/inference/providers";

const model = (id: string): ProviderModel => ({ id, parameterSize: "1B", description: `about ${id}` });

/** A provider whose model list the test sets (null: down), counting the fetches. */
class FakeProvider implements Provider {
  fetches = 0;
  constructor(
    readonly name: string,
    public models: ProviderModel[] | null,
  ) {}
  async listModels(): Promise<ProviderModel[]> {
    this.fetches += 1;
    if (!this.models) throw new ProviderFailure("unavailable", "down");
    return this.models;
  }
  ping = async () => undefined;
  complete = async () => ({ text: "", promptTokens: 0, completionTokens: 0 });
  stream = async (): Promise<AsyncIterable<StreamChunk>> => (async function* () {})();
  embed = async () => ({ vectors: [], promptTokens: 0 });
}

class MemoryStore implements SnapshotStore {
  saved?: Snapshot;
  async get() {
    return this.saved;
  }
  async set(s: Snapshot) {
    this.saved = s;
  }
}

function catalogue(providers: Provider[], extra: { store?: SnapshotStore } = {}) {
  let now = 1_000_000;
  const cat = new ModelCatalogue({ providers, ttlMs: 30_000, partialTtlMs: 5_000, fetchTimeoutMs: 1_000, minRefreshMs: 1_000, now: () => now, ...extra });
  return { cat, advance: (ms: number) => (now += ms) };
}

describe("inference - model list merge", () => {
  test("inference - providers merge in configuration order; a shared name stays with the first, the copy is <provider>/<name>", () => {
    const merged = mergeModels([
      { provider: "ollama", models: [model("llama3.2:1b"), model("qwen2.5:0.5b")] },
      { provider: "vllm", models: [model("llama3.2:1b"), model("Qwen/Qwen2.5-7B-Instruct")] },
    ]);
    expect(merged.entries.map((e) => [e.name, e.provider, e.upstreamId])).toEqual([
      ["llama3.2:1b", "ollama", "llama3.2:1b"],
      ["qwen2.5:0.5b", "ollama", "qwen2.5:0.5b"],
      ["vllm/llama3.2:1b", "vllm", "llama3.2:1b"],
      ["Qwen/Qwen2.5-7B-Instruct", "vllm", "Qwen/Qwen2.5-7B-Instruct"],
    ]);
    expect(merged.unreachable).toEqual([]);
  });

  test("inference - a provider that is down drops out of the list and is named as unreachable", () => {
    const merged = mergeModels([
      { provider: "ollama", models: null },
      { provider: "vllm", models: [model("a")] },
    ]);
    expect(merged.entries.map((e) => e.name)).toEqual(["a"]);
    expect(merged.unreachable).toEqual(["ollama"]);
  });
});

describe("inference - model catalogue cache", () => {
  test("inference - the list is fetched once per TTL, then again", async () => {
    const p = new FakeProvider("ollama", [model("a")]);
    const { cat, advance } = catalogue([p]);
    await cat.current();
    await cat.current();
    expect(p.fetches).toBe(1);
    advance(30_001);
    await cat.current();
    expect(p.fetches).toBe(2);
  });

  test("inference - concurrent callers share one fetch", async () => {
    const p = new FakeProvider("ollama", [model("a")]);
    const { cat } = catalogue([p]);
    await Promise.all([cat.current(), cat.current(), cat.resolve("a")]);
    expect(p.fetches).toBe(1);
  });

  test("inference - a list missing a provider is kept only briefly, so a provider coming back shows up", async () => {
    const up = new FakeProvider("ollama", [model("a")]);
    const down = new FakeProvider("vllm", null);
    const { cat, advance } = catalogue([up, down]);
    expect((await cat.current()).entries.map((e) => e.name)).toEqual(["a"]);
    down.models = [model("b")];
    advance(4_000);
    expect((await cat.current()).entries.map((e) => e.name)).toEqual(["a"]);
    advance(1_001);
    expect((await cat.current()).entries.map((e) => e.name)).toEqual(["a", "b"]);
  });

  test("inference - resolve answers a known model from a stale list without waiting, and refreshes it behind", async () => {
    const p = new FakeProvider("ollama", [model("a")]);
    const { cat, advance } = catalogue([p]);
    await cat.current();
    advance(60_000);
    const { entry } = await cat.resolve("a");
    expect(entry?.provider).toBe("ollama");
    await cat.current(); // the background refresh already ran or is shared
    expect(p.fetches).toBe(2);
  });

  test("inference - an unknown model refreshes the list, at most once per minRefresh", async () => {
    const p = new FakeProvider("ollama", [model("a")]);
    const { cat, advance } = catalogue([p]);
    await cat.current();
    advance(1_001);
    p.models = [model("a"), model("new")];
    expect((await cat.resolve("new")).entry?.name).toBe("new");
    expect(p.fetches).toBe(2);
    expect((await cat.resolve("missing")).entry).toBeUndefined();
    expect((await cat.resolve("missing")).entry).toBeUndefined();
    expect(p.fetches).toBe(2); // within minRefresh of the last fetch
    advance(1_001);
    await cat.resolve("missing");
    expect(p.fetches).toBe(3);
  });

  test("inference - a list shared through the store is adopted instead of fetching (another replica's)", async () => {
    const store = new MemoryStore();
    const first = new FakeProvider("ollama", [model("a")]);
    await catalogue([first], { store }).cat.current();
    expect(store.saved?.entries.map((e) => e.name)).toEqual(["a"]);
    const second = new FakeProvider("ollama", [model("a")]);
    const { cat } = catalogue([second], { store });
    expect((await cat.current()).entries.map((e) => e.name)).toEqual(["a"]);
    expect(second.fetches).toBe(0);
  });

  test("inference - invalidate makes the next list fetch again", async () => {
    const p = new FakeProvider("ollama", [model("a")]);
    const { cat } = catalogue([p]);
    await cat.current();
    cat.invalidate();
    await cat.current();
    expect(p.fetches).toBe(2);
  });
});

describe("inference - provider failures to API errors", () => {
  test.each([
    ["unavailable", new ProviderFailure("unavailable", "x"), "SERVICE_UNAVAILABLE", "error"],
    ["HTTP error", new ProviderFailure("error", "Model provider answered 500: boom", 500), "PROVIDER_ERROR", "error"],
    ["malformed", new ProviderFailure("error", "Model provider returned malformed output"), "PROVIDER_ERROR", "error"],
    ["model unknown to the provider", new ProviderFailure("not_found", "x", 404), "MODEL_NOT_FOUND", "error"],
    ["timeout", new ProviderFailure("timeout", "x"), "PROVIDER_TIMEOUT", "timeout"],
    ["client went away", new ProviderFailure("aborted", "x"), "SERVICE_UNAVAILABLE", "aborted"],
  ])("inference - %s", (_name, failure, code, outcome) => {
    const pub = publicFailure(failure, "ollama", "llama3.2:1b", 1000);
    expect(pub.code).toBe(code);
    expect((pub.details as Record<string, unknown>).provider).toBe("ollama");
    expect(outcomeOf(failure)).toBe(outcome);
  });

  test("inference - a field the model cannot honour is 400 VALIDATION_FAILED naming it, recorded as an error", () => {
    const failure = new ProviderFailure("unsupported", "Model provider answered 400: registry.ollama.ai/library/x:latest does not support tools", 400, "tools");
    const pub = publicFailure(failure, "ollama", "x", 1000);
    expect(pub).toEqual({
      code: "VALIDATION_FAILED",
      message: expect.stringContaining("does not support tools"),
      details: [{ field: "tools", message: pub.message }],
    });
    expect(pub.message).toContain('Model "x" (provider "ollama") cannot honour `tools`');
    expect(outcomeOf(failure)).toBe("error");
  });

  test.each([
    ["a URL", "Post http://10.1.2.3:11434/api/chat: refused", "Post [url]: refused"],
    ["an IPv4 address with port", "dial tcp 192.168.0.7:8000: connection refused", "dial tcp [address]: connection refused"],
    ["a host:port", "connect to gpu-box.internal:11434 failed", "connect to [address] failed"],
    ["an IPv6 address", "dial [::1]:8000 refused", "dial [address] refused"],
    ["plain text stays", "model requires more system memory (5.2 GiB) than is available", "model requires more system memory (5.2 GiB) than is available"],
  ])("inference - scrub removes %s", (_name, input, expected) => {
    expect(scrub(input)).toBe(expected);
  });

  test("inference - scrub caps long provider messages", () => {
    expect(scrub("x".repeat(1000)).length).toBeLessThanOrEqual(301);
  });
});

describe("inference - OPENAI_PROVIDERS", () => {
  test("inference - a JSON list of providers, names lowercased, key optional", () => {
    expect(parseOpenAiProviders('[{"name":"VLLM","url":"http://127.0.0.1:8000","apiKey":"k"},{"name":"lmstudio","url":"http://127.0.0.1:1234/v1"}]')).toEqual([
      { name: "vllm", url: "http://127.0.0.1:8000", apiKey: "k" },
      { name: "lmstudio", url: "http://127.0.0.1:1234/v1" },
    ]);
    expect(parseOpenAiProviders(undefined)).toEqual([]);
    expect(parseOpenAiProviders(" ")).toEqual([]);
  });

  test.each([
    ["not JSON", "vllm=http://x"],
    ["not a list", '{"name":"vllm","url":"http://x"}'],
    ["no name", '[{"url":"http://x"}]'],
    ["a name with a slash", '[{"name":"a/b","url":"http://x"}]'],
    ["no URL", '[{"name":"vllm"}]'],
    ["not an http URL", '[{"name":"vllm","url":"ftp://x"}]'],
    ["a key that is not a string", '[{"name":"vllm","url":"http://x","apiKey":42}]'],
  ])("inference - refuses %s", (_name, raw) => {
    expect(() => parseOpenAiProviders(raw)).toThrow(/OPENAI_PROVIDERS/);
  });
});
