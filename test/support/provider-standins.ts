/**
 * Stand-ins for the external model providers, speaking their real wire formats (from Ollama's
 * API docs and OpenAI's chat completions reference), on 127.0.0.1 port 0. Tests script them:
 * delays, HTTP errors, connections dropped mid-answer, malformed output, chunks released one at a
 * time; and read back what they saw: requests, and connections the client closed early.
 */
import { EventEmitter } from "events";
import http, { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "http";
import type { AddressInfo } from "net";

export type Script = {
  /** The answer's text, one piece per streamed chunk. */
  chunks: string[];
  promptTokens: number;
  completionTokens: number;
  /** Before answering at all (headers included)… */
  delayMs: number;
  /** …plus a share of this, as real models vary: fixed by a `#<n>` in the prompt, else random. */
  jitterMs: number;
  /** Between streamed chunks. */
  chunkDelayMs: number;
  /** Answer every chat request with this HTTP error. */
  fail?: { status: number; message: string };
  /** Destroy the connection after this many chunks (0: mid-body of a non-streamed answer). */
  dropAfter?: number;
  /** Send output that is not JSON (a streamed answer: after its first chunk). */
  malformed?: boolean;
  /** A streamed answer reports this error in-band after its first chunk, then ends. */
  errorMidStream?: string;
  /** Each streamed chunk waits for `release()`. */
  gated?: boolean;
  /** The answer was cut at the token limit (Ollama's done_reason / OpenAI's finish_reason "length"). */
  truncated?: boolean;
};

/** A stand-in embedding: a fixed function of the text, so tests can check which vector is whose. */
export const standinEmbedding = (text: string): number[] => [text.length, text.charCodeAt(0) / 128, 0.25];

/** Embedding endpoints' common checks: the scripted failure, a known model, text inputs. */
function embedInputs(body: any, knows: (model: string) => boolean): string[] | { status: number; message: string } {
  if (!knows(body?.model)) return { status: 404, message: `model "${body?.model}" not found` };
  const input = typeof body?.input === "string" ? [body.input] : body?.input;
  if (!Array.isArray(input) || !input.every((i) => typeof i === "string")) return { status: 400, message: "invalid input" };
  return input;
}

export const DEFAULT_SCRIPT: Script = {
  chunks: ["Hello", ", ", "world", "!"],
  promptTokens: 12,
  completionTokens: 4,
  delayMs: 0,
  jitterMs: 0,
  chunkDelayMs: 0,
  dropAfter: undefined,
};

export type RecordedRequest = { method: string; path: string; headers: IncomingHttpHeaders; body: any; closedEarly: boolean };

// Unref'd: a scripted delay still running must not hold a finished test process open.
const sleep = (ms: number): Promise<void> => (ms > 0 ? new Promise((r) => setTimeout(r, ms).unref()) : Promise.resolve());

abstract class Standin extends EventEmitter {
  script: Script = { ...DEFAULT_SCRIPT };
  readonly requests: RecordedRequest[] = [];
  /** Requests whose connection the client closed before the answer was complete. */
  closedEarly = 0;
  /** TCP connections accepted (keep-alive reuse shows as fewer connections than requests). */
  connections = 0;
  private server?: http.Server;
  private port = 0;
  private credits = 0;
  private waiters: Array<() => void> = [];

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts listening (again on the same port after stop(), unless one is given). */
  async start(port = this.port): Promise<this> {
    const server = http.createServer({ noDelay: true, keepAliveTimeout: 60_000 }, (req, res) => void this.dispatch(req, res));
    server.on("connection", () => (this.connections += 1));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  /** Replaces the script (fields not given take their defaults) and resets the gate. */
  set(script: Partial<Script>): this {
    this.script = { ...DEFAULT_SCRIPT, ...script };
    this.credits = 0;
    // Answers still held at the gate go on (an abandoned one sees its closed connection and stops).
    for (const waiter of this.waiters.splice(0)) waiter();
    return this;
  }

  /** Lets `n` gated chunks go. */
  release(n = 1): void {
    for (let i = 0; i < n; i++) {
      const waiter = this.waiters.shift();
      if (waiter) waiter();
      else this.credits += 1;
    }
  }

  /** The scripted wait before answering `body` (Ollama and OpenAI bodies both carry `messages`). */
  protected delayFor(body: any): number {
    const messages = Array.isArray(body?.messages) ? body.messages : [];
    const tag = /#(\d+)/.exec(String(messages[messages.length - 1]?.content ?? ""));
    // Knuth's multiplicative hash spreads consecutive numbers over [0, 1).
    const share = tag ? (Math.imul(Number(tag[1]), 2654435761) >>> 0) / 2 ** 32 : Math.random();
    return this.script.delayMs + share * this.script.jitterMs;
  }

  protected async gate(): Promise<void> {
    if (!this.script.gated) return sleep(this.script.chunkDelayMs);
    if (this.credits > 0) {
      this.credits -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  lastRequest(path: string): RecordedRequest | undefined {
    return [...this.requests].reverse().find((r) => r.path === path);
  }

  protected abstract route(req: IncomingMessage, res: ServerResponse, record: RecordedRequest): Promise<void>;

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const record: RecordedRequest = { method: req.method ?? "", path: (req.url ?? "").split("?")[0], headers: req.headers, body, closedEarly: false };
    this.requests.push(record);
    res.once("close", () => {
      if (res.writableFinished) return;
      record.closedEarly = true;
      this.closedEarly += 1;
      this.emit("closed-early", record);
    });
    try {
      await this.route(req, res, record);
    } catch {
      if (!res.destroyed) res.destroy();
    }
  }

  protected json(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  /** A non-streamed answer, or its scripted failure (malformed, dropped mid-body). */
  protected async answer(res: ServerResponse, body: unknown, delayMs: number): Promise<void> {
    await sleep(delayMs);
    if (res.destroyed) return;
    if (this.script.malformed) {
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end('{"message": {"content": "Hel');
    }
    if (this.script.dropAfter !== undefined) {
      res.writeHead(200, { "content-type": "application/json", "content-length": 1000 });
      res.write(JSON.stringify(body).slice(0, 20));
      return void setImmediate(() => res.destroy());
    }
    this.json(res, 200, body);
  }

  /** A streamed answer: `line(piece)` per chunk, then `finish()`'s lines; honours the script. */
  protected async streamLines(
    res: ServerResponse,
    delayMs: number,
    contentType: string,
    line: (piece: string) => string,
    finish: () => string[],
    malformedLine: string,
    errorLine: (message: string) => string,
  ): Promise<void> {
    await sleep(delayMs);
    if (res.destroyed) return;
    res.writeHead(200, { "content-type": contentType, "cache-control": "no-cache" });
    const { chunks, dropAfter, malformed } = this.script;
    let flushed: Promise<void> = Promise.resolve();
    for (let i = 0; i < chunks.length; i++) {
      if (i > 0) await this.gate();
      if (res.destroyed) return;
      if (dropAfter !== undefined && i >= dropAfter) {
        await flushed; // what was written reaches the client before the connection drops
        return void res.destroy();
      }
      if (malformed && i === 1) return void res.end(malformedLine);
      if (this.script.errorMidStream && i === 1) return void res.end(errorLine(this.script.errorMidStream));
      flushed = new Promise((resolve) => res.write(line(chunks[i]), () => resolve()));
    }
    if (chunks.length) await this.gate();
    if (res.destroyed) return;
    res.end(finish().join(""));
  }
}

export type OllamaTag = { name: string; details?: Record<string, unknown>; size?: number };

export class OllamaStandin extends Standin {
  models: OllamaTag[] = [
    { name: "llama3.2:1b", size: 1_321_098_329, details: { format: "gguf", family: "llama", parameter_size: "1.2B", quantization_level: "Q8_0" } },
    { name: "qwen2.5:0.5b", size: 397_821_319, details: { format: "gguf", family: "qwen2", parameter_size: "494.03M", quantization_level: "Q4_K_M" } },
  ];

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
    const base = { model: body.model, created_at: new Date().toISOString() };
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
    if (body.stream === false) return this.answer(res, { ...final, message: { role: "assistant", content: this.script.chunks.join("") } }, this.delayFor(body));
    return this.streamLines(
      res,
      this.delayFor(body),
      "application/x-ndjson",
      (piece) => `${JSON.stringify({ ...base, message: { role: "assistant", content: piece }, done: false })}\n`,
      () => [`${JSON.stringify({ ...final, message: { role: "assistant", content: "" } })}\n`],
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
    const id = `chatcmpl-${Math.random().toString(36).slice(2, 12)}`;
    const finishReason = this.script.truncated ? "length" : "stop";
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
          choices: [{ index: 0, message: { role: "assistant", content: this.script.chunks.join("") }, logprobs: null, finish_reason: finishReason }],
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
