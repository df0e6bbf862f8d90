/**
 * The OpenAI-compatible API (vLLM, llama.cpp's server, LM Studio, hosted services): GET
 * /v1/models, POST /v1/chat/completions; streamed answers are server-sent events ending with
 * `data: [DONE]`, token counts in `usage` (asked for with stream_options.include_usage); POST
 * /v1/embeddings. Tools and structured output pass through in OpenAI's shape (openai-tools.ts).
 */
import type { Agent } from "http";
import { describeModel, estimateTokens, parameterSizeOf } from "../model-info";
import { HttpEndpoint, readJson, readLines, readText } from "./http";
import { openAiChatFields, StreamedToolCalls, toolCallsOf } from "./openai-tools";
import { refusedField } from "./tool-calls";
import { ChatRequest, Completion, Embeddings, Finish, isVector, promptText, Provider, ProviderFailure, ProviderModel, StreamChunk, Usage } from "./types";

type OpenAiModel = { id?: unknown; owned_by?: unknown; meta?: { n_params?: unknown } };
type OpenAiUsage = { prompt_tokens?: unknown; completion_tokens?: unknown };
type OpenAiAnswer = {
  choices?: Array<{ message?: { content?: unknown; tool_calls?: unknown }; delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }>;
  usage?: OpenAiUsage | null;
  error?: unknown;
  object?: unknown;
};

const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);
const malformed = () => new ProviderFailure("error", "Model provider returned malformed output");
/** A forced tool choice may end with "stop" after its call: an answer with calls ends with "tool_calls". */
const finishOf = (reason: unknown, calls: boolean): Finish => (calls ? { finishReason: "tool_calls" } : reason === "length" ? { finishReason: "length" } : {});

function messageOf(body: unknown): string | undefined {
  const b = body as { error?: unknown; message?: unknown; detail?: unknown };
  if (typeof b?.error === "object" && b.error !== null) return str((b.error as { message?: unknown }).message);
  return str(b?.error) ?? str(b?.message) ?? str(b?.detail);
}

/** The provider's counts; where a server leaves `usage` out, an estimate (about 4 characters a token). */
function usageOf(usage: OpenAiUsage | null | undefined, request: ChatRequest, text: string): Usage {
  const valid = (v: unknown) => Number.isInteger(v) && (v as number) >= 0;
  if (usage && valid(usage.prompt_tokens) && valid(usage.completion_tokens))
    return { promptTokens: usage.prompt_tokens as number, completionTokens: usage.completion_tokens as number };
  return { promptTokens: estimateTokens(promptText(request)), completionTokens: estimateTokens(text) };
}

export class OpenAiProvider implements Provider {
  private readonly http: HttpEndpoint;

  constructor(
    readonly name: string,
    url: string,
    apiKey?: string,
    /** How to connect (a deployment's replica: through its node); absent: plain HTTP(S). */
    agent?: Agent,
  ) {
    // Accept both "http://host:8000" and the SDKs' "http://host:8000/v1".
    const base = url.replace(/\/+$/, "");
    this.http = new HttpEndpoint(/\/v1$/.test(base) ? base : `${base}/v1`, apiKey ? { authorization: `Bearer ${apiKey}` } : {}, agent);
  }

  async listModels(signal: AbortSignal): Promise<ProviderModel[]> {
    const res = await this.http.sendOk("GET", "/models", undefined, signal, messageOf);
    const body = (await readJson(res, signal)) as { data?: unknown };
    if (!Array.isArray(body?.data)) throw malformed();
    return (body.data as OpenAiModel[]).flatMap((model) => {
      const id = str(model?.id);
      if (!id) return [];
      // llama.cpp's server reports the parameter count in meta.n_params.
      const params = typeof model.meta?.n_params === "number" ? model.meta.n_params : undefined;
      const parameterSize = parameterSizeOf({ name: id, params });
      return [{ id, parameterSize, description: describeModel({ provider: this.name, parameterSize, owner: str(model.owned_by) }) }];
    });
  }

  async ping(signal: AbortSignal): Promise<void> {
    const res = await this.http.sendOk("GET", "/models", undefined, signal, messageOf);
    await readText(res, signal);
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    const res = await this.chat(request, false, signal);
    const body = (await readJson(res, signal)) as OpenAiAnswer;
    const choice = Array.isArray(body?.choices) ? body.choices[0] : undefined;
    const content = choice?.message?.content;
    // null content is a valid answer (nothing generated); anything else but a string is not.
    if (!choice || (content !== null && typeof content !== "string")) throw malformed();
    const text = content ?? "";
    const toolCalls = toolCallsOf(choice.message?.tool_calls);
    const output = toolCalls.length ? `${text}${JSON.stringify(toolCalls)}` : text;
    return {
      text,
      ...usageOf(body.usage, request, output),
      ...finishOf(choice.finish_reason, toolCalls.length > 0),
      ...(toolCalls.length ? { toolCalls } : {}),
    };
  }

  async embed(model: string, input: string[], signal: AbortSignal): Promise<Embeddings> {
    const res = await this.http.sendOk("POST", "/embeddings", { model, input, encoding_format: "float" }, signal, messageOf);
    const body = (await readJson(res, signal)) as { data?: Array<{ embedding?: unknown; index?: unknown }>; usage?: OpenAiUsage };
    if (!Array.isArray(body?.data) || body.data.length !== input.length) throw malformed();
    const vectors: number[][] = [];
    for (const [i, item] of body.data.entries()) {
      const at = Number.isInteger(item?.index) ? (item.index as number) : i;
      if (at < 0 || at >= input.length || vectors[at] || !isVector(item.embedding)) throw malformed();
      vectors[at] = item.embedding;
    }
    const tokens = body.usage?.prompt_tokens;
    return { vectors, promptTokens: Number.isInteger(tokens) && (tokens as number) >= 0 ? (tokens as number) : estimateTokens(input.join("")) };
  }

  async stream(request: ChatRequest, signal: AbortSignal): Promise<AsyncIterable<StreamChunk>> {
    return this.chunks(readLines(await this.chat(request, true, signal), signal), request);
  }

  /** POST /chat/completions; the server's 400 about tools or a format is the refusal naming the field. */
  private chat(request: ChatRequest, stream: boolean, signal: AbortSignal) {
    return this.http.sendOk("POST", "/chat/completions", this.chatBody(request, stream), signal, messageOf).catch((err) => {
      throw refusedField(err, request);
    });
  }

  private async *chunks(lines: AsyncIterable<string>, request: ChatRequest): AsyncGenerator<StreamChunk> {
    let text = "";
    let usage: OpenAiUsage | undefined;
    let finish: Finish = {};
    let data: string[] = [];
    let finished = false;
    const calls = new StreamedToolCalls();
    for await (const line of lines) {
      if (finished) continue; // drain, so the connection is reused
      if (line.startsWith("data:")) {
        data.push(line.slice(line.charCodeAt(5) === 32 ? 6 : 5));
        continue;
      }
      if (line !== "" || data.length === 0) continue; // comments, event:/id: fields, keep-alives
      const payload = data.join("\n");
      data = [];
      if (payload === "[DONE]") {
        finished = true;
        calls.check();
        yield { type: "usage", ...usageOf(usage, request, text), ...(calls.count ? finishOf(undefined, true) : finish) };
        continue;
      }
      let event: OpenAiAnswer;
      try {
        event = JSON.parse(payload);
      } catch {
        throw malformed();
      }
      if (event === null || typeof event !== "object") throw malformed();
      // OpenAI sends {"error": {…}}; some vLLM versions {"object": "error", "message": …}.
      if (event.error !== undefined || event.object === "error")
        throw new ProviderFailure("error", `Model provider failed: ${messageOf(event) ?? "unknown error"}`);
      if (event.usage) usage = event.usage;
      const choice = Array.isArray(event.choices) ? event.choices[0] : undefined;
      if (choice?.finish_reason) finish = finishOf(choice.finish_reason, false);
      const delta = choice?.delta?.content;
      if (typeof delta === "string" && delta) {
        text += delta;
        yield { type: "delta", text: delta };
      }
      for (const part of calls.parts(choice?.delta?.tool_calls)) {
        text += part.arguments; // for the estimate, when the server counts no usage
        yield { type: "tool_call", ...part };
      }
    }
    if (!finished) throw new ProviderFailure("error", "Model provider ended the stream before finishing");
  }

  private chatBody(request: ChatRequest, stream: boolean) {
    // Options left undefined are dropped by JSON.stringify: the server keeps its defaults.
    return {
      model: request.model,
      ...openAiChatFields(request),
      temperature: request.temperature,
      max_tokens: request.maxTokens,
      top_p: request.topP,
      stop: request.stop,
      seed: request.seed,
      user: request.user,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    };
  }
}
