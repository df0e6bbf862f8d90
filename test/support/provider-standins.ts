/**
 * Stand-ins for the external model providers, speaking their real wire formats (from Ollama's
 * API docs and OpenAI's chat completions reference), on 127.0.0.1 port 0. Tests script them:
 * delays, HTTP errors, connections dropped mid-answer, malformed output, chunks released one at a
 * time, tool calls (standin-tools.ts); and read back what they saw: requests, and connections the
 * client closed early.
 */
import type { IncomingMessage, ServerResponse } from "http";
import { embedInputs, RecordedRequest, Standin, standinEmbedding } from "./standin-server";
import { ollamaRefusal, ollamaToolCalls, openAiRefusal, openAiToolCalls, openAiToolDeltas } from "./standin-tools";

export { DEFAULT_SCRIPT, standinEmbedding } from "./standin-server";
export type { RecordedRequest, Script } from "./standin-server";
export type { ScriptedCall } from "./standin-tools";

export type OllamaTag = { name: string; details?: Record<string, unknown>; size?: number };

export class OllamaStandin extends Standin {
  models: OllamaTag[] = [
    { name: "llama3.2:1b", size: 1_321_098_329, details: { format: "gguf", family: "llama", parameter_size: "1.2B", quantization_level: "Q8_0" } },
    { name: "qwen2.5:0.5b", size: 397_821_319, details: { format: "gguf", family: "qwen2", parameter_size: "494.03M", quantization_level: "Q4_K_M" } },
  ];
  /** Models whose template has no tools: a request offering tools is Ollama's 400. */
  readonly withoutTools = new Set<string>();

  protected async route(_req: IncomingMessage, res: ServerResponse, record: RecordedRequest): Promise<void> {
    const key = `${record.method} ${record.path}`;
    if (key === "GET /api/version") return this.json(res, 200, { version: "0.6.5" });
    if (key === "GET /api/tags") {
      const models = this.models.map((m) => ({
        name: m.name,
        model: m.name,
        modified_at: "2025-05-10T08:06:48.639712648-07:00",
        size: m.size ?? 0,
        digest: "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
        details: { parent_model: "", format: "gguf", families: [m.details?.family ?? "llama"], ...m.details },
      }));
      return this.json(res, 200, { models });
    }
    if (key === "POST /api/embed") {
      if (this.script.fail) return this.json(res, this.script.fail.status, { error: this.script.fail.message });
      const input = embedInputs(record.body, (m) => this.models.some((t) => t.name === m));
      if (!Array.isArray(input)) return this.json(res, input.status, { error: input.message });
      return this.json(res, 200, { model: record.body.model, embeddings: input.map(standinEmbedding), prompt_eval_count: this.script.promptTokens });
    }
    if (key !== "POST /api/chat") return this.json(res, 404, { error: "404 page not found" });
    const body = record.body ?? {};
    if (this.script.fail) return this.json(res, this.script.fail.status, { error: this.script.fail.message });
    if (!this.models.some((m) => m.name === body.model)) return this.json(res, 404, { error: `model "${body.model}" not found, try pulling it first` });
    const refusal = ollamaRefusal(body, this.withoutTools);
    if (refusal) return this.json(res, refusal.status, { error: refusal.message });
    const base = { model: body.model, created_at: new Date().toISOString() };
    const calls = this.script.toolCalls?.length ? { tool_calls: ollamaToolCalls(this.script.toolCalls) } : {};
    const final = {
      ...base,
      done: true,
      done_reason: this.script.truncated ? "length" : "stop",
      total_duration: 4_883_583_458,
      load_duration: 1_334_875,
      prompt_eval_count: this.script.promptTokens,
      prompt_eval_duration: 342_546_000,
      eval_count: this.script.completionTokens,
      eval_duration: 4_535_599_000,
    };
    // Ollama streams unless told `"stream": false`.
    if (body.stream === false)
      return this.answer(res, { ...final, message: { role: "assistant", content: this.script.chunks.join(""), ...calls } }, this.delayFor(body));
    const withDone = this.script.toolCallsWithDone ? calls : {};
    const before =
      this.script.toolCalls?.length && !this.script.toolCallsWithDone ? [{ ...base, message: { role: "assistant", content: "", ...calls }, done: false }] : [];
    return this.streamLines(
      res,
      this.delayFor(body),
      "application/x-ndjson",
      (piece) => `${JSON.stringify({ ...base, message: { role: "assistant", content: piece }, done: false })}\n`,
      () => [...before, { ...final, message: { role: "assistant", content: "", ...withDone } }].map((line) => `${JSON.stringify(line)}\n`),
      "{this is not json\n",
      (error) => `${JSON.stringify({ error })}\n`,
    );
  }
}

export class OpenAiStandin extends Standin {
  models: Array<{ id: string; owned_by?: string; meta?: Record<string, unknown> }> = [
    { id: "Qwen/Qwen2.5-7B-Instruct", owned_by: "vllm" },
    { id: "llama3.2:1b", owned_by: "vllm" },
  ];
  /** When set, requests must carry `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** When false, streamed answers carry no usage chunk (servers that ignore include_usage). */
  sendUsage = true;
  /** Models served without tool calling (vLLM without --enable-auto-tool-choice): "auto" tools are its 400. */
  readonly withoutTools = new Set<string>();

  protected async route(req: IncomingMessage, res: ServerResponse, record: RecordedRequest): Promise<void> {
    const error = (status: number, message: string, type: string, code: string | null = null) =>
      this.json(res, status, { error: { message, type, param: null, code } });
    if (this.apiKey && req.headers.authorization !== `Bearer ${this.apiKey}`)
      return error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key");
    const key = `${record.method} ${record.path}`;
    if (key === "GET /v1/models")
      return this.json(res, 200, {
        object: "list",
        data: this.models.map((m) => ({
          id: m.id,
          object: "model",
          created: 1_715_000_000,
          owned_by: m.owned_by ?? "organization-owner",
          ...(m.meta ? { meta: m.meta } : {}),
        })),
      });
    if (key === "POST /v1/embeddings") {
      if (this.script.fail) return error(this.script.fail.status, this.script.fail.message, "server_error");
      const input = embedInputs(record.body, (m) => this.models.some((x) => x.id === m));
      if (!Array.isArray(input)) return error(input.status, input.message, "invalid_request_error");
      // Reversed on purpose: clients must order by `index`, not by position.
      const data = input.map((text, index) => ({ object: "embedding", index, embedding: standinEmbedding(text) })).reverse();
      return this.json(res, 200, {
        object: "list",
        data,
        model: record.body.model,
        usage: { prompt_tokens: this.script.promptTokens, total_tokens: this.script.promptTokens },
      });
    }
    if (key !== "POST /v1/chat/completions") return error(404, "Not found", "invalid_request_error");
    const body = record.body ?? {};
    if (this.script.fail) return error(this.script.fail.status, this.script.fail.message, "server_error");
    if (!this.models.some((m) => m.id === body.model))
      return error(404, `The model \`${body.model}\` does not exist or you do not have access to it.`, "invalid_request_error", "model_not_found");
    const refusal = openAiRefusal(body, this.withoutTools);
    if (refusal)
      return this.json(res, refusal.status, { object: "error", message: refusal.message, type: "BadRequestError", param: refusal.param ?? null, code: 400 });
    const id = `chatcmpl-${Math.random().toString(36).slice(2, 12)}`;
    const toolCalls = this.script.toolCalls ?? [];
    const finishReason = this.script.truncated ? "length" : toolCalls.length ? "tool_calls" : "stop";
    const created = Math.floor(Date.now() / 1000);
    const usage = {
      prompt_tokens: this.script.promptTokens,
      completion_tokens: this.script.completionTokens,
      total_tokens: this.script.promptTokens + this.script.completionTokens,
    };
    if (!body.stream)
      return this.answer(
        res,
        {
          id,
          object: "chat.completion",
          created,
          model: body.model,
          choices: [
            {
              index: 0,
              message: toolCalls.length
                ? { role: "assistant", content: this.script.chunks.join("") || null, tool_calls: openAiToolCalls(toolCalls) }
                : { role: "assistant", content: this.script.chunks.join("") },
              logprobs: null,
              finish_reason: finishReason,
            },
          ],
          usage,
        },
        this.delayFor(body),
      );
    const chunk = (delta: Record<string, unknown>, finish: string | null) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: body.model, system_fingerprint: "fp_standin", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
    let first = true;
    return this.streamLines(
      res,
      this.delayFor(body),
      "text/event-stream",
      (piece) => {
        const delta = first ? { role: "assistant", content: piece } : { content: piece };
        first = false;
        return chunk(delta, null);
      },
      () => [
        // A first delta that is a tool call carries the role and content null, as OpenAI sends it.
        ...openAiToolDeltas(toolCalls).map((delta, i) => chunk(first && i === 0 ? { role: "assistant", content: null, ...delta } : delta, null)),
        chunk({}, finishReason),
        ...(this.sendUsage && body.stream_options?.include_usage
          ? [`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: body.model, choices: [], usage })}\n\n`]
          : []),
        "data: [DONE]\n\n",
      ],
      "data: {this is not json\n\n",
      (message) => `data: ${JSON.stringify({ error: { message, type: "server_error", param: null, code: null } })}\n\n`,
    );
  }
}
