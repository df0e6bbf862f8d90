/**
 * Ollama's REST API: GET /api/tags (models), GET /api/version (health), POST /api/chat with
 * messages and options (temperature, num_predict, top_p, stop, seed); streamed answers are NDJSON
 * lines, the last with done: true and the token counts (prompt_eval_count, eval_count); POST
 * /api/embed for embeddings. Tools and structured output map to Ollama's own fields (ollama-tools.ts).
 */
import { describeModel, parameterSizeOf } from "../model-info";
import { HttpEndpoint, readJson, readLines, readText } from "./http";
import { ollamaChatFields, OllamaToolCall, toolCallsOf } from "./ollama-tools";
import { refusedField } from "./tool-calls";
import { ChatRequest, Completion, Embeddings, Finish, isVector, Provider, ProviderFailure, ProviderModel, StreamChunk } from "./types";

type OllamaTag = {
  name?: unknown;
  model?: unknown;
  size?: unknown;
  details?: { family?: unknown; format?: unknown; parameter_size?: unknown; quantization_level?: unknown };
};
type OllamaChat = {
  message?: { content?: unknown; tool_calls?: OllamaToolCall[] };
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
/** Ollama says "stop" after tool calls too. */
const finishOf = (chat: OllamaChat, calls: boolean): Finish =>
  calls ? { finishReason: "tool_calls" } : chat.done_reason === "length" ? { finishReason: "length" } : {};

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
    const res = await this.chat(request, false, signal);
    const body = (await readJson(res, signal)) as OllamaChat;
    if (typeof body?.message?.content !== "string") throw malformed();
    const toolCalls = toolCallsOf(body.message.tool_calls);
    const usage = { promptTokens: count(body.prompt_eval_count), completionTokens: count(body.eval_count) };
    return { text: body.message.content, ...usage, ...finishOf(body, toolCalls.length > 0), ...(toolCalls.length ? { toolCalls } : {}) };
  }

  async embed(model: string, input: string[], signal: AbortSignal): Promise<Embeddings> {
    const res = await this.http.sendOk("POST", "/api/embed", { model, input }, signal, messageOf);
    const body = (await readJson(res, signal)) as { embeddings?: unknown; prompt_eval_count?: unknown };
    const vectors = body?.embeddings;
    if (!Array.isArray(vectors) || vectors.length !== input.length || !vectors.every(isVector)) throw malformed();
    return { vectors: vectors as number[][], promptTokens: count(body.prompt_eval_count) };
  }

  async stream(request: ChatRequest, signal: AbortSignal): Promise<AsyncIterable<StreamChunk>> {
    return this.chunks(readLines(await this.chat(request, true, signal), signal));
  }

  /** POST /api/chat; a model that cannot do what was asked (tools) is the refusal naming the field. */
  private async chat(request: ChatRequest, stream: boolean, signal: AbortSignal) {
    const body = { ...this.chatBody(request, stream), ...ollamaChatFields(request) };
    return this.http.sendOk("POST", "/api/chat", body, signal, messageOf).catch((err) => {
      throw refusedField(err, request);
    });
  }

  private async *chunks(lines: AsyncIterable<string>): AsyncGenerator<StreamChunk> {
    let finished = false;
    let calls = 0;
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
      // Ollama gives each tool call whole, in the chunk before done or in the last one.
      for (const call of toolCallsOf(chunk.message?.tool_calls)) yield { type: "tool_call", index: calls++, ...call };
      if (chunk.done === true) {
        finished = true;
        const usage = { promptTokens: count(chunk.prompt_eval_count), completionTokens: count(chunk.eval_count) };
        yield { type: "usage", ...usage, ...finishOf(chunk, calls > 0) };
      }
    }
    if (!finished) throw new ProviderFailure("error", "Model provider ended the stream before finishing");
  }

  private chatBody(request: ChatRequest, stream: boolean) {
    // Options left undefined are dropped by JSON.stringify: Ollama keeps the model's defaults.
    const { temperature, maxTokens, topP, stop, seed } = request;
    return { model: request.model, stream, options: { temperature, num_predict: maxTokens, top_p: topP, stop, seed } };
  }
}
