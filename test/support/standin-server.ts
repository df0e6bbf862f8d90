/**
 * The HTTP server under both provider stand-ins (provider-standins.ts): the script a test sets
 * (answer, delays, failures, tool calls), the gate that releases streamed chunks one at a time,
 * and the record of every request seen and of connections the client closed early.
 */
import { EventEmitter } from "events";
import http, { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "http";
import type { AddressInfo } from "net";
import type { ScriptedCall } from "./standin-tools";

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
  /** Tool calls the answer makes after its text (standin-tools.ts writes them in each provider's format). */
  toolCalls?: ScriptedCall[];
  /** Ollama: the tool calls come in the last chunk (done: true) instead of the one before it. */
  toolCallsWithDone?: boolean;
};

/** A stand-in embedding: a fixed function of the text, so tests can check which vector is whose. */
export const standinEmbedding = (text: string): number[] => [text.length, text.charCodeAt(0) / 128, 0.25];

/** Embedding endpoints' common checks: the scripted failure, a known model, text inputs. */
export function embedInputs(body: any, knows: (model: string) => boolean): string[] | { status: number; message: string } {
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
/** A classified request as it arrived: its kind and the requests of each kind then in flight (itself not counted). */
export type Arrival = { kind: string; at: number; inFlight: Readonly<Record<string, number>> };

// Unref'd: a scripted delay still running must not hold a finished test process open.
const sleep = (ms: number): Promise<void> => (ms > 0 ? new Promise((r) => setTimeout(r, ms).unref()) : Promise.resolve());

export abstract class Standin extends EventEmitter {
  script: Script = { ...DEFAULT_SCRIPT };
  readonly requests: RecordedRequest[] = [];
  /** Requests whose connection the client closed before the answer was complete. */
  closedEarly = 0;
  /** TCP connections accepted (keep-alive reuse shows as fewer connections than requests). */
  connections = 0;
  /** Sorts requests into kinds (e.g. batch lines and interactive chats by their prompt): counted in `inFlight`, each arrival emitted as "arrival". */
  classify?: (record: RecordedRequest) => string | undefined;
  /** Classified requests in flight now, per kind: from their arrival until their answer ends or their connection closes. */
  readonly inFlight = new Map<string, number>();
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
    const kind = this.classify?.(record);
    if (kind !== undefined) {
      this.emit("arrival", { kind, at: Date.now(), inFlight: Object.fromEntries(this.inFlight) } satisfies Arrival);
      this.inFlight.set(kind, (this.inFlight.get(kind) ?? 0) + 1);
      res.once("close", () => this.inFlight.set(kind, this.inFlight.get(kind)! - 1));
    }
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
