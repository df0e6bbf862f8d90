import { Readable } from "stream";
import { ModelCatalogue } from "../../services/inference/catalogue";
import type { InferenceRecord } from "../../services/inference/attempt-log";
import { InferenceEngine } from "../../services/inference/engine";
import { ChatRequest, Provider, ProviderFailure, StreamChunk } from "../../services/inference/providers";
import { UsageRecorder } from "../../services/inference/usage.repository";
import { waitFor } from "../support/platform";

/** A provider whose stream yields what the test feeds it, and stops when its signal aborts. */
class ScriptedProvider implements Provider {
  readonly name = "ollama";
  private feed: Array<(chunk: StreamChunk | null) => void> = [];
  private pending: Array<StreamChunk | null> = [];
  up = true;

  push(chunk: StreamChunk | null) {
    const waiter = this.feed.shift();
    if (waiter) waiter(chunk);
    else this.pending.push(chunk);
  }
  async listModels() {
    if (!this.up) throw new ProviderFailure("unavailable", "down");
    return [{ id: "m", parameterSize: "1B", description: "" }];
  }
  ping = async () => undefined;
  complete = async (r: ChatRequest) => ({ text: r.messages[r.messages.length - 1].content, promptTokens: 1, completionTokens: 1 });
  embed = async (_m: string, input: string[]) => ({ vectors: input.map((t) => [t.length]), promptTokens: input.length });
  async stream(_r: ChatRequest, signal: AbortSignal): Promise<AsyncIterable<StreamChunk>> {
    const next = () =>
      new Promise<StreamChunk | null>((resolve, reject) => {
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        if (this.pending.length) resolve(this.pending.shift()!);
        else this.feed.push(resolve);
      });
    return (async function* () {
      for (let c = await next(); c; c = await next()) yield c;
    })();
  }
}

function setup(provider: ScriptedProvider) {
  const records: InferenceRecord[] = [];
  const catalogue = new ModelCatalogue({ providers: [provider], ttlMs: 60_000, partialTtlMs: 5_000, fetchTimeoutMs: 1_000, minRefreshMs: 0 });
  let n = 0;
  const engine = new InferenceEngine({
    catalogue,
    providers: [provider],
    timeoutMs: 5_000,
    healthTimeoutMs: 1_000,
    onFinished: (r) => records.push(r),
    newId: () => `id-${++n}`,
  });
  return { engine, records };
}

const params = { model: "m", prompt: "hi", temperature: 0.7, maxTokens: 16 };

async function readAll(stream: Readable): Promise<string> {
  let text = "";
  for await (const chunk of stream) text += chunk;
  return text;
}

describe("inference - engine", () => {
  test("inference - a stream is aborted only by its own client; it then ends without an error event and counts as aborted", async () => {
    const provider = new ScriptedProvider();
    const { engine, records } = setup(provider);
    const { id, stream } = await engine.openStream("client-a", params);
    provider.push({ type: "delta", text: "Hel" });
    expect(engine.abort(id, "client-b")).toBe(false);
    expect(engine.abort("id-unknown", "client-a")).toBe(false);
    const events = stream[Symbol.asyncIterator]();
    expect(String((await events.next()).value)).toBe(`data: ${JSON.stringify({ id, model: "m", delta: "Hel" })}\n\n`);
    expect(engine.abort(id, "client-a")).toBe(true);
    expect((await events.next()).done).toBe(true);
    expect(records).toEqual([expect.objectContaining({ id, clientId: "client-a", outcome: "aborted", errorCode: null, stream: true })]);
    // Abandoned before the provider counted: the generated chunk and the prompt ("hi": 1 token) still count.
    expect(records[0]).toMatchObject({ promptTokens: 1, completionTokens: 1, tokensUsed: 2 });
    expect(engine.abort(id, "client-a")).toBe(false); // finished: nothing left to abort
  });

  test("inference - destroying the stream (the HTTP client left) aborts the provider call", async () => {
    const provider = new ScriptedProvider();
    const { engine, records } = setup(provider);
    const { stream } = await engine.openStream("client-a", params);
    stream.destroy();
    await waitFor(() => records.length > 0, { message: "the aborted inference to be reported" });
    expect(records[0]).toMatchObject({ outcome: "aborted" });
  });

  test("inference - the done event carries the whole text and the provider's token counts", async () => {
    const provider = new ScriptedProvider();
    const { engine, records } = setup(provider);
    const { id, stream } = await engine.openStream("client-a", params);
    provider.push({ type: "delta", text: "a" });
    provider.push({ type: "delta", text: "b" });
    provider.push({ type: "usage", promptTokens: 5, completionTokens: 2 });
    provider.push(null);
    const events = (await readAll(stream))
      .trim()
      .split("\n\n")
      .map((e) => JSON.parse(e.slice(6)));
    expect(events[2]).toEqual({ id, model: "m", response: "ab", tokensUsed: 7, durationMs: expect.any(Number), done: true });
    expect(records[0]).toMatchObject({ outcome: "ok", promptTokens: 5, completionTokens: 2, tokensUsed: 7 });
  });

  test("inference - an unknown model while a provider is down is 503, not 404", async () => {
    const provider = new ScriptedProvider();
    provider.up = false;
    const { engine, records } = setup(provider);
    await expect(engine.infer("client-a", params)).rejects.toMatchObject({ type: "SERVICE_UNAVAILABLE", code: 503 });
    provider.up = true;
    await expect(engine.infer("client-a", { ...params, model: "other" })).rejects.toMatchObject({ type: "MODEL_NOT_FOUND", code: 404 });
    expect(records.map((r) => [r.model, r.provider, r.errorCode])).toEqual([
      ["m", null, "SERVICE_UNAVAILABLE"],
      ["other", null, "MODEL_NOT_FOUND"],
    ]);
  });
});

describe("inference - usage recorder", () => {
  const record = (id: string) => ({ id }) as InferenceRecord;

  test("inference - records are written in batches, in order, once a batch fills or on flush", async () => {
    const batches: string[][] = [];
    const recorder = new UsageRecorder({ insertMany: async (rs) => void batches.push(rs.map((r) => r.id)) }, () => undefined, { maxBatch: 2, flushMs: 60_000 });
    recorder.add(record("1"));
    recorder.add(record("2"));
    recorder.add(record("3"));
    await recorder.flush();
    expect(batches).toEqual([["1", "2"], ["3"]]);
  });

  test("inference - a failed write is reported with what it lost, and later writes go on", async () => {
    const lost: number[] = [];
    const written: string[] = [];
    let fail = true;
    const recorder = new UsageRecorder(
      {
        insertMany: async (rs) => {
          if (fail) throw new Error("database down");
          written.push(...rs.map((r) => r.id));
        },
      },
      (_err, n) => lost.push(n),
      { maxBatch: 10, flushMs: 60_000 },
    );
    recorder.add(record("1"));
    recorder.add(record("2"));
    await recorder.flush();
    fail = false;
    recorder.add(record("3"));
    await recorder.flush();
    expect(lost).toEqual([2]);
    expect(written).toEqual(["3"]);
  });

  test("inference - a buffered record is written by the timer without a flush", async () => {
    const written: string[] = [];
    const recorder = new UsageRecorder({ insertMany: async (rs) => void written.push(...rs.map((r) => r.id)) }, () => undefined, { maxBatch: 10, flushMs: 5 });
    recorder.add(record("1"));
    await waitFor(() => written.length > 0, { message: "the timer's write" });
    expect(written).toEqual(["1"]);
  });
});
