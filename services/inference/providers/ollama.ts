/**
 * Ollama's REST API: GET /api/tags (models), GET /api/version (health), POST /api/chat with
 * messages and options (temperature, num_predict, top_p, stop, seed); streamed answers are NDJSON
 * lines, the last with done: true and the token counts (prompt_eval_count, eval_count); POST
 * /api/embed for embeddings.
 */
import { describeModel, parameterSizeOf } from "../model-info";
import { HttpEndpoint, readJson, readLines, readText } from "./http";
import { ChatRequest, Completion, Embeddings, Finish, isVector, Provider, ProviderFailure, ProviderModel, StreamChunk } from "./types";

type OllamaTag = {
  name?: unknown;
  model?: unknown;
  size?: unknown;
  details?: { family?: unknown; format?: unknown; parameter_size?: unknown; quantization_level?: unknown };
};
type OllamaChat = {
  message?: { content?: unknown };
  done?: unknown;
  done_reason?: unknown;
  error?: unknown;
  prompt_eval_count?: unknown;
  eval_count?: unknown;
};

const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);
/** Ollama leaves prompt_eval_count out when the whole prompt came from its cache. */
const count = (v: unknown): number => (Number.isInteger(v) && (v as number) >= 0 ? (v as number) : 0);
const messageOf = (body: unknown) => str((body as { error?: unknown })?.error);
const malformed = () => new ProviderFailure("error", "Model provider returned malformed output");
const finishOf = (chat: OllamaChat): Finish => (chat.done_reason === "length" ? { finishReason: "length" } : {});

export class OllamaProvider implements Provider {
  private readonly http: HttpEndpoint;

  constructor(
    url: string,
    readonly name = "ollama",
  ) {
    this.http = new HttpEndpoint(url);
  }

  async listModels(signal: AbortSignal): Promise<ProviderModel[]> {
    const res = await this.http.sendOk("GET", "/api/tags", undefined, signal, messageOf);
    const body = (await readJson(res, signal)) as { models?: unknown };
    if (!Array.isArray(body?.models)) throw malformed();
    return (body.models as OllamaTag[]).flatMap((tag) => {
      const id = str(tag?.name) ?? str(tag?.model);
      if (!id) return [];
      const details = tag.details ?? {};
      const parameterSize = parameterSizeOf({
        reported: str(details.parameter_size),
        name: id,
        sizeBytes: typeof tag.size === "number" ? tag.size : undefined,
        quantization: str(details.quantization_level),
      });
      const description = describeModel({
        provider: this.name,
        parameterSize,
        family: str(details.family),
        quantization: str(details.quantization_level),
        format: str(details.format),
      });
      return [{ id, parameterSize, description }];
    });
  }

  async ping(signal: AbortSignal): Promise<void> {
    const res = await this.http.sendOk("GET", "/api/version", undefined, signal, messageOf);
    await readText(res, signal);
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    const res = await this.http.sendOk("POST", "/api/chat", this.chatBody(request, false), signal, messageOf);
    const body = (await readJson(res, signal)) as OllamaChat;
    if (typeof body?.message?.content !== "string") throw malformed();
    return { text: body.message.content, promptTokens: count(body.prompt_eval_count), completionTokens: count(body.eval_count), ...finishOf(body) };
  }

  async embed(model: string, input: string[], signal: AbortSignal): Promise<Embeddings> {
    const res = await this.http.sendOk("POST", "/api/embed", { model, input }, signal, messageOf);
    const body = (await readJson(res, signal)) as { embeddings?: unknown; prompt_eval_count?: unknown };
    const vectors = body?.embeddings;
    if (!Array.isArray(vectors) || vectors.length !== input.length || !vectors.every(isVector)) throw malformed();
    return { vectors: vectors as number[][], promptTokens: count(body.prompt_eval_count) };
  }

  async stream(request: ChatRequest, signal: AbortSignal): Promise<AsyncIterable<StreamChunk>> {
    const res = await this.http.sendOk("POST", "/api/chat", this.chatBody(request, true), signal, messageOf);
    return this.chunks(readLines(res, signal));
  }

  private async *chunks(lines: AsyncIterable<string>): AsyncGenerator<StreamChunk> {
    let finished = false;
    for await (const line of lines) {
      if (finished || !line.trim()) continue; // after done: drain, so the connection is reused
      let chunk: OllamaChat;
      try {
        chunk = JSON.parse(line);
      } catch {
        throw malformed();
      }
      if (chunk === null || typeof chunk !== "object") throw malformed();
      const error = str(chunk.error);
      if (error) throw new ProviderFailure("error", `Model provider failed: ${error}`);
      const text = chunk.message?.content;
      if (typeof text === "string" && text) yield { type: "delta", text };
      if (chunk.done === true) {
        finished = true;
        yield { type: "usage", promptTokens: count(chunk.prompt_eval_count), completionTokens: count(chunk.eval_count), ...finishOf(chunk) };
      }
    }
    if (!finished) throw new ProviderFailure("error", "Model provider ended the stream before finishing");
  }

  private chatBody(request: ChatRequest, stream: boolean) {
    // Options left undefined are dropped by JSON.stringify: Ollama keeps the model's defaults.
    const { temperature, maxTokens, topP, stop, seed } = request;
    return { model: request.model, messages: request.messages, stream, options: { temperature, num_predict: maxTokens, top_p: topP, stop, seed } };
  }
}
