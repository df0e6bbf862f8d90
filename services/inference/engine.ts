/**
 * One inference, from model name to answer: route through the catalogue, call the provider under
 * a deadline, measure, and report every attempt (ok or not) to `onFinished` for usage accounting
 * (attempt-log.ts). A model's fallbacks (MODEL_FALLBACKS, or the request's own list) are tried in
 * order when an attempt fails before its first token. Streams become server-sent events in the
 * caller's format (stream-pump.ts); destroying the stream (the client went away) or `abort(id)`
 * cancels the provider request.
 */
import { randomUUID } from "crypto";
import type { Readable } from "stream";
import { apiError } from "../../lib/errors";
import { CallControl } from "./call-control";
import type { ModelCatalogue, ModelEntry } from "./catalogue";
import type { InferenceResult, PublicModel } from "./contract";
import { asFailure, toApiError } from "./errors";
import { Answer, Embedded, PLATFORM_SSE, StreamFormat, withFirst } from "./answers";
import { Attempt, AttemptLog, elapsed, InferenceRecord } from "./attempt-log";
import { ChatMessage, ChatOptions, ChatRequest, promptText, Provider, StreamChunk, Usage } from "./providers";
import { clientStream, pump } from "./stream-pump";

export type { Answer, Embedded, StreamFormat } from "./answers";

/** POST /api/models/infer's parameters. */
export type InferParams = {
  model: string;
  prompt: string;
  systemPrompt?: string;
  temperature: number;
  maxTokens: number;
  /** Not a field of the route: set only by the service, narrowing MODEL_FALLBACKS to a token's models (token-models.ts). */
  fallbacks?: string[];
};

/** A chat: `fallbacks` (the request's own list) replaces the configured MODEL_FALLBACKS of `model`. */
export type ChatParams = ChatOptions & { model: string; messages: ChatMessage[]; fallbacks?: string[] };

/** Told the tokens a stream used and the model that used them, once it ended (answered, failed or abandoned). */
export type StreamEnd = (tokensUsed: number, model: string) => void;

export type EngineOptions = {
  catalogue: ModelCatalogue;
  providers: Provider[];
  timeoutMs: number;
  healthTimeoutMs: number;
  onFinished: (record: InferenceRecord) => void;
  /** MODEL_FALLBACKS: model → the models to try next, in order. */
  fallbacks?: Readonly<Record<string, readonly string[]>>;
  /** The caller's model deployments (deployments/router.ts): a name that is one routes to its ready replica with the fewest requests in flight. */
  deployments?: { pick(clientId: string, model: string): Promise<{ entry: ModelEntry; provider: Provider } | undefined> };
  newId?: () => string;
};

/**
 * The engine's refusals that a fallback model may answer instead (VALIDATION_FAILED comes from a
 * provider only: a model that cannot honour a field, such as tools, which another model may).
 */
const FALLBACK_CODES = new Set(["MODEL_NOT_FOUND", "SERVICE_UNAVAILABLE", "PROVIDER_ERROR", "PROVIDER_TIMEOUT", "VALIDATION_FAILED"]);
const movesOn = (err: unknown) => FALLBACK_CODES.has(String((err as { type?: unknown })?.type));

export class InferenceEngine {
  private readonly providers: Map<string, Provider>;
  private readonly active = new Map<string, { clientId: string; control: CallControl }>();
  private readonly newId: () => string;
  private readonly log: AttemptLog;
  private healthCheck?: Promise<Record<string, boolean>>;

  constructor(private readonly opts: EngineOptions) {
    this.providers = new Map(opts.providers.map((p) => [p.name, p]));
    this.newId = opts.newId ?? randomUUID;
    this.log = new AttemptLog(opts);
  }

  /** The same providers, catalogue and fallbacks, its attempts told to `onFinished` instead (batch lines: batch-line.ts). */
  derive(onFinished: EngineOptions["onFinished"]): InferenceEngine {
    return new InferenceEngine({ ...this.opts, onFinished });
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
    const a = await this.chat(clientId, chatOf(params));
    return { id: a.id, model: a.model, response: a.text, tokensUsed: a.promptTokens + a.completionTokens, durationMs: a.durationMs };
  }

  /** A non-streamed chat, moving on along the model's fallbacks while attempts fail. */
  async chat(clientId: string, params: ChatParams): Promise<Answer> {
    const startedAt = performance.now();
    return this.alongFallbacks(params, async (model) => {
      const { id, entry, value, durationMs } = await this.call(clientId, model, startedAt, (e, p, signal) => p.complete(this.request(e, params), signal));
      return { id, model: entry.name, durationMs, ...value };
    });
  }

  /** One vector per input (no fallbacks: another model's vectors are not comparable). */
  async embed(clientId: string, model: string, input: string[]): Promise<Embedded> {
    const startedAt = performance.now();
    const embed = (e: ModelEntry, p: Provider, signal: AbortSignal) => p.embed(e.upstreamId, input, signal);
    const { id, entry, value } = await this.call(clientId, model, startedAt, embed, (v) => ({ promptTokens: v.promptTokens, completionTokens: 0 }));
    return { id, model: entry.name, ...value };
  }

  /** POST /api/models/infer with "stream": true: the platform's events. */
  openStream(clientId: string, params: InferParams, onEnd?: StreamEnd): Promise<{ id: string; model: string; stream: Readable }> {
    return this.openChatStream(clientId, chatOf(params), PLATFORM_SSE, onEnd);
  }

  /**
   * Resolves once the provider accepted the request (with a fallback left: once its first chunk
   * came), so refusals (unknown model, provider down, provider error) are ordinary errors; from
   * then on failures are the stream's last event. `onEnd` hears the tokens the stream used once it ended.
   */
  openChatStream(clientId: string, params: ChatParams, format: StreamFormat, onEnd?: StreamEnd): Promise<{ id: string; model: string; stream: Readable }> {
    const startedAt = performance.now();
    return this.alongFallbacks(params, (model, last) => this.streamWith(clientId, model, params, format, startedAt, !last, onEnd));
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

  /** The models a chat may be answered by, in the order tried: its model, then its fallbacks. */
  modelsOf(params: Pick<ChatParams, "model" | "fallbacks">): string[] {
    const configured = this.opts.fallbacks && Object.hasOwn(this.opts.fallbacks, params.model) ? this.opts.fallbacks[params.model] : [];
    return [...new Set([params.model, ...(params.fallbacks ?? configured)])];
  }

  /** `attempt` for the model, then each fallback while the previous failed in a way another model may not. */
  private async alongFallbacks<T>(params: ChatParams, attempt: (model: string, last: boolean) => Promise<T>): Promise<T> {
    const chain = this.modelsOf(params);
    for (let i = 0; ; i++) {
      const last = i === chain.length - 1;
      try {
        return await attempt(chain[i], last);
      } catch (err) {
        if (last || !movesOn(err)) throw err;
      }
    }
  }

  /** One provider call under the deadline, recorded whatever its outcome. */
  private async call<T>(
    clientId: string,
    model: string,
    startedAt: number,
    work: (entry: ModelEntry, provider: Provider, signal: AbortSignal) => Promise<T>,
    usageOf: (value: T) => Usage = (v) => v as Usage,
  ): Promise<{ id: string; entry: ModelEntry; value: T; durationMs: number }> {
    const id = this.newId();
    const { entry, provider } = await this.route(id, clientId, model, startedAt, false);
    const attempt: Attempt = { id, clientId, entry, stream: false, startedAt };
    const control = new CallControl(this.opts.timeoutMs);
    try {
      const value = await work(entry, provider, control.signal);
      const durationMs = elapsed(startedAt);
      this.log.answered(attempt, durationMs, usageOf(value));
      return { id, entry, value, durationMs };
    } catch (err) {
      throw toApiError(this.log.failed(attempt, asFailure(err)));
    } finally {
      control.dispose();
    }
  }

  private async streamWith(
    clientId: string,
    model: string,
    params: ChatParams,
    format: StreamFormat,
    startedAt: number,
    waitFirst: boolean,
    onEnd: StreamEnd = () => undefined,
  ) {
    const id = this.newId();
    const { entry, provider } = await this.route(id, clientId, model, startedAt, true);
    const attempt: Attempt = { id, clientId, entry, stream: true, startedAt };
    const control = new CallControl(this.opts.timeoutMs);
    this.active.set(id, { clientId, control });
    let chunks: AsyncIterator<StreamChunk>;
    let first: IteratorResult<StreamChunk> | undefined;
    try {
      chunks = (await provider.stream(this.request(entry, params), control.signal))[Symbol.asyncIterator]();
      // With a fallback left, a failure before the first chunk must still be able to move on.
      if (waitFirst) first = await chunks.next();
    } catch (err) {
      this.active.delete(id);
      control.dispose();
      throw toApiError(this.log.failed(attempt, asFailure(err)));
    }
    const stream = clientStream(control);
    const prompt = promptText(params);
    const settled = () => this.active.delete(id);
    void pump({ attempt, chunks: withFirst(first, chunks), control, stream, format, prompt, log: this.log, settled }).then(
      (used) => onEnd(used, entry.name),
      () => onEnd(0, entry.name),
    );
    return { id, model: entry.name, stream };
  }

  private async route(id: string, clientId: string, model: string, startedAt: number, stream: boolean) {
    const deployed = await this.opts.deployments?.pick(clientId, model).catch((err: { type?: string }) => {
      this.log.unrouted(id, clientId, model, stream, startedAt, err.type ?? "INTERNAL");
      throw err;
    });
    if (deployed) return deployed;
    const { entry, snapshot } = await this.opts.catalogue.resolve(model);
    const provider = entry && this.providers.get(entry.provider);
    if (entry && provider) return { entry, provider };
    // With a provider down, the model may well exist there: that is 503, not 404.
    const error = snapshot.unreachable.length
      ? apiError("SERVICE_UNAVAILABLE", "A model provider is unavailable, the model cannot be looked up", { providers: snapshot.unreachable })
      : apiError("MODEL_NOT_FOUND", `Model "${model.slice(0, 200)}" not found`);
    this.log.unrouted(id, clientId, model, stream, startedAt, error.type);
    throw error;
  }

  private request(entry: ModelEntry, params: ChatParams): ChatRequest {
    const { temperature, maxTokens, topP, stop, seed, user, tools, toolChoice, parallelToolCalls, responseFormat } = params;
    return {
      model: entry.upstreamId,
      messages: params.messages,
      temperature,
      maxTokens,
      topP,
      stop,
      seed,
      user,
      tools,
      toolChoice,
      parallelToolCalls,
      responseFormat,
    };
  }
}

/** The prompt of POST /api/models/infer as chat messages (an empty system prompt is none). */
function chatOf(params: InferParams): ChatParams {
  const messages: ChatMessage[] = params.systemPrompt ? [{ role: "system", content: params.systemPrompt }] : [];
  messages.push({ role: "user", content: params.prompt });
  return { model: params.model, messages, temperature: params.temperature, maxTokens: params.maxTokens, fallbacks: params.fallbacks };
}
