/**
 * One inference, from model name to answer: route through the catalogue, call the provider under
 * a deadline, measure, and report every attempt (ok or not) to `onFinished` for usage accounting.
 * Streams become server-sent events; destroying the stream (the client went away) or `abort(id)`
 * cancels the provider request.
 */
import { randomUUID } from "crypto";
import { Readable } from "stream";
import { apiError } from "../../lib/errors";
import type { ModelCatalogue, ModelEntry } from "./catalogue";
import type { InferenceResult, PublicModel } from "./contract";
import { asFailure, Outcome, outcomeOf, publicFailure, PublicFailure, toApiError } from "./errors";
import { ChatRequest, Provider, ProviderFailure, StreamChunk, Usage } from "./providers";

export type InferParams = {
  model: string;
  prompt: string;
  systemPrompt?: string;
  temperature: number;
  maxTokens: number;
};

export type InferenceRecord = {
  id: string;
  clientId: string;
  model: string;
  provider: string | null;
  promptTokens: number;
  completionTokens: number;
  tokensUsed: number;
  durationMs: number;
  outcome: Outcome;
  errorCode: string | null;
  stream: boolean;
};

export type EngineOptions = {
  catalogue: ModelCatalogue;
  providers: Provider[];
  timeoutMs: number;
  healthTimeoutMs: number;
  onFinished: (record: InferenceRecord) => void;
  newId?: () => string;
};

/** One server-sent event. */
export const sseEvent = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`;

/** A provider call's cancellation: a deadline (re-armed by `touch` while a stream moves) or an abort. */
class CallControl {
  private readonly controller = new AbortController();
  private timer?: NodeJS.Timeout;

  constructor(private readonly timeoutMs: number) {
    this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  touch(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.controller.abort(new ProviderFailure("timeout", `No answer within ${this.timeoutMs} ms`)), this.timeoutMs);
  }

  abort(reason: string): void {
    this.controller.abort(new ProviderFailure("aborted", reason));
  }

  dispose(): void {
    clearTimeout(this.timer);
  }
}

const elapsed = (startedAt: number) => Math.round(performance.now() - startedAt);

export class InferenceEngine {
  private readonly providers: Map<string, Provider>;
  private readonly active = new Map<string, { clientId: string; control: CallControl }>();
  private readonly newId: () => string;
  private healthCheck?: Promise<Record<string, boolean>>;

  constructor(private readonly opts: EngineOptions) {
    this.providers = new Map(opts.providers.map((p) => [p.name, p]));
    this.newId = opts.newId ?? randomUUID;
  }

  async listModels(): Promise<PublicModel[]> {
    const { entries } = await this.opts.catalogue.current();
    return entries.map(({ name, provider, parameterSize, description }) => ({ name, provider, parameterSize, description }));
  }

  /**
   * One boolean per configured provider, checked in parallel under a short deadline. Concurrent
   * callers share one check: a public endpoint must not multiply requests to the providers.
   */
  health(): Promise<Record<string, boolean>> {
    this.healthCheck ??= this.checkHealth().finally(() => (this.healthCheck = undefined));
    return this.healthCheck;
  }

  private async checkHealth(): Promise<Record<string, boolean>> {
    const checks = await Promise.all(
      this.opts.providers.map(async (provider) => {
        const control = new CallControl(this.opts.healthTimeoutMs);
        try {
          await provider.ping(control.signal);
          return [provider.name, true] as const;
        } catch {
          return [provider.name, false] as const;
        } finally {
          control.dispose();
        }
      }),
    );
    return Object.fromEntries(checks);
  }

  async infer(clientId: string, params: InferParams): Promise<InferenceResult> {
    const startedAt = performance.now();
    const id = this.newId();
    const { entry, provider } = await this.route(id, clientId, params.model, startedAt, false);
    const control = new CallControl(this.opts.timeoutMs);
    try {
      const answer = await provider.complete(this.request(entry, params), control.signal);
      const durationMs = elapsed(startedAt);
      this.finish(id, clientId, entry, false, durationMs, "ok", null, answer);
      return { id, model: entry.name, response: answer.text, tokensUsed: answer.promptTokens + answer.completionTokens, durationMs };
    } catch (err) {
      throw toApiError(this.failed(id, clientId, entry, false, startedAt, asFailure(err)));
    } finally {
      control.dispose();
    }
  }

  /**
   * Resolves once the provider accepted the request, so refusals (unknown model, provider down,
   * provider error) are ordinary errors; from then on failures are the stream's last event.
   */
  async openStream(clientId: string, params: InferParams): Promise<{ id: string; stream: Readable }> {
    const startedAt = performance.now();
    const id = this.newId();
    const { entry, provider } = await this.route(id, clientId, params.model, startedAt, true);
    const control = new CallControl(this.opts.timeoutMs);
    this.active.set(id, { clientId, control });
    let chunks: AsyncIterable<StreamChunk>;
    try {
      chunks = await provider.stream(this.request(entry, params), control.signal);
    } catch (err) {
      this.active.delete(id);
      control.dispose();
      throw toApiError(this.failed(id, clientId, entry, true, startedAt, asFailure(err)));
    }
    const stream = new Readable({
      read() {},
      destroy(err, callback) {
        control.abort("Client closed the stream");
        callback(err);
      },
    });
    void this.pump(id, clientId, entry, chunks, control, stream, startedAt);
    return { id, stream };
  }

  /** Cancels a running stream (the gateway calls this when its client goes away). */
  abort(id: string, clientId?: string): boolean {
    const running = this.active.get(id);
    if (!running || (clientId !== undefined && running.clientId !== clientId)) return false;
    running.control.abort("Client closed the stream");
    return true;
  }

  abortAll(): void {
    for (const { control } of this.active.values()) control.abort("Service stopping");
  }

  private async pump(
    id: string,
    clientId: string,
    entry: ModelEntry,
    chunks: AsyncIterable<StreamChunk>,
    control: CallControl,
    stream: Readable,
    startedAt: number,
  ): Promise<void> {
    const send = (event: unknown) => {
      if (!stream.destroyed) stream.push(sseEvent(event));
    };
    let text = "";
    let usage: Usage = { promptTokens: 0, completionTokens: 0 };
    // Providers stream one token per chunk: what a stream that stops before its usage report generated.
    let generated = 0;
    try {
      for await (const chunk of chunks) {
        control.touch();
        if (chunk.type === "delta") {
          generated++;
          text += chunk.text;
          send({ id, model: entry.name, delta: chunk.text });
        } else usage = chunk;
      }
      const durationMs = elapsed(startedAt);
      const tokensUsed = usage.promptTokens + usage.completionTokens;
      send({ id, model: entry.name, response: text, tokensUsed, durationMs, done: true });
      this.finish(id, clientId, entry, true, durationMs, "ok", null, usage);
    } catch (err) {
      const failure = asFailure(err);
      const sofar = usage.promptTokens + usage.completionTokens > 0 ? usage : { promptTokens: 0, completionTokens: generated };
      const pub = this.failed(id, clientId, entry, true, startedAt, failure, sofar);
      if (failure.kind !== "aborted") send({ error: { code: pub.code, message: pub.message, details: pub.details } });
    } finally {
      control.dispose();
      this.active.delete(id);
      if (!stream.destroyed) stream.push(null);
    }
  }

  private async route(id: string, clientId: string, model: string, startedAt: number, stream: boolean) {
    const { entry, snapshot } = await this.opts.catalogue.resolve(model);
    const provider = entry && this.providers.get(entry.provider);
    if (entry && provider) return { entry, provider };
    // With a provider down, the model may well exist there: that is 503, not 404.
    const error = snapshot.unreachable.length
      ? apiError("SERVICE_UNAVAILABLE", "A model provider is unavailable, the model cannot be looked up", { providers: snapshot.unreachable })
      : apiError("MODEL_NOT_FOUND", `Model "${model.slice(0, 200)}" not found`);
    this.opts.onFinished({
      ...this.baseRecord(id, clientId, model, null, stream),
      durationMs: elapsed(startedAt),
      outcome: "error",
      errorCode: error.type,
    });
    throw error;
  }

  private request(entry: ModelEntry, params: InferParams): ChatRequest {
    return {
      model: entry.upstreamId,
      prompt: params.prompt,
      systemPrompt: params.systemPrompt || undefined,
      temperature: params.temperature,
      maxTokens: params.maxTokens,
    };
  }

  private failed(
    id: string,
    clientId: string,
    entry: ModelEntry,
    stream: boolean,
    startedAt: number,
    failure: ProviderFailure,
    usage: Usage = { promptTokens: 0, completionTokens: 0 },
  ): PublicFailure {
    const pub = publicFailure(failure, entry.provider, entry.name, this.opts.timeoutMs);
    if (failure.kind === "not_found") this.opts.catalogue.invalidate();
    const outcome = outcomeOf(failure);
    this.finish(id, clientId, entry, stream, elapsed(startedAt), outcome, outcome === "aborted" ? null : pub.code, usage);
    return pub;
  }

  private finish(
    id: string,
    clientId: string,
    entry: ModelEntry,
    stream: boolean,
    durationMs: number,
    outcome: Outcome,
    errorCode: string | null,
    usage: Usage,
  ): void {
    this.opts.onFinished({
      ...this.baseRecord(id, clientId, entry.name, entry.provider, stream),
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      tokensUsed: usage.promptTokens + usage.completionTokens,
      durationMs,
      outcome,
      errorCode,
    });
  }

  private baseRecord(id: string, clientId: string, model: string, provider: string | null, stream: boolean): InferenceRecord {
    return { id, clientId, model, provider, stream, promptTokens: 0, completionTokens: 0, tokensUsed: 0, durationMs: 0, outcome: "ok", errorCode: null };
  }
}
