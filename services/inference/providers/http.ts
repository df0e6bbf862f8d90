/**
 * The HTTP side of every provider adapter: keep-alive connections (the hot path must not pay a
 * TCP handshake per inference), cancellation through an AbortSignal, and network errors turned
 * into ProviderFailures that never carry the provider's URL or host.
 */
import http, { IncomingMessage } from "http";
import https from "https";
import { StringDecoder } from "string_decoder";
import { ProviderFailure } from "./types";

const AGENT_OPTIONS = { keepAlive: true, maxSockets: 1024, scheduling: "lifo" as const };
const agents = { "http:": new http.Agent(AGENT_OPTIONS), "https:": new https.Agent(AGENT_OPTIONS) };

/** Errors that mean "no working connection to the provider" (503, not 502). */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ECONNABORTED"]);

const MAX_BODY_BYTES = 16 * 1024 * 1024;
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** The reason a signal was aborted with, as a ProviderFailure (timeout or aborted). */
export function abortReason(signal: AbortSignal): ProviderFailure {
  return signal.reason instanceof ProviderFailure ? signal.reason : new ProviderFailure("aborted", "Request aborted");
}

export class HttpEndpoint {
  private readonly base: URL;
  /** Request targets by path, resolved once: the hot path does not parse URLs. */
  private readonly targets = new Map<string, http.RequestOptions>();

  constructor(
    baseUrl: string,
    private readonly headers: Record<string, string> = {},
    /** The connections' agent (a deployment's replica: deployments/tunnel.ts); absent: the shared keep-alive agents. */
    private readonly agent?: http.Agent,
  ) {
    // A trailing slash makes relative paths keep a prefix such as http://host/ollama/.
    this.base = new URL(baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`);
  }

  /** Sends a request; resolves with the response as soon as its headers arrived. */
  /** send(), and a non-200 answer becomes the provider's failure (its error text via messageOf). */
  async sendOk(
    method: "GET" | "POST",
    path: string,
    body: unknown,
    signal: AbortSignal,
    messageOf: (body: unknown) => string | undefined,
  ): Promise<IncomingMessage> {
    const res = await this.send(method, path, body, signal);
    if (res.statusCode !== 200) throw await httpFailure(res, signal, messageOf);
    return res;
  }

  async send(method: "GET" | "POST", path: string, body: unknown, signal: AbortSignal): Promise<IncomingMessage> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    try {
      return await this.attempt(method, path, payload, signal);
    } catch (err) {
      // A kept-alive socket the provider closed while idle: Node's documented case for one retry.
      if ((err as { staleSocket?: boolean }).staleSocket && !signal.aborted) return this.attempt(method, path, payload, signal);
      throw err;
    }
  }

  private target(path: string): http.RequestOptions {
    let target = this.targets.get(path);
    if (!target) {
      const url = new URL(path.replace(/^\//, ""), this.base);
      target = {
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        agent: this.agent ?? agents[url.protocol as "http:" | "https:"],
        ...(url.username ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` } : {}),
      };
      this.targets.set(path, target);
    }
    return target;
  }

  private attempt(method: string, path: string, payload: string | undefined, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(abortReason(signal));
      const target = this.target(path);
      const headers: Record<string, string | number> = { accept: "application/json, text/event-stream, application/x-ndjson", ...this.headers };
      if (payload !== undefined) {
        headers["content-type"] = "application/json";
        headers["content-length"] = Buffer.byteLength(payload);
      }
      const transport = target.protocol === "https:" ? https : http;
      const req = transport.request({ ...target, method, headers });
      const onAbort = () => req.destroy(abortReason(signal));
      signal.addEventListener("abort", onAbort, { once: true });
      req.once("response", (res) => {
        // The listener stays until the body is consumed: an abort must also cut a streaming body.
        res.once("close", () => signal.removeEventListener("abort", onAbort));
        resolve(res);
      });
      req.once("error", (err: NodeJS.ErrnoException) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) return reject(abortReason(signal));
        const failure = UNREACHABLE.has(err.code ?? "")
          ? new ProviderFailure("unavailable", "Model provider is unreachable")
          : new ProviderFailure("error", "Model provider request failed");
        if (err.code === "ECONNRESET" && req.reusedSocket) Object.assign(failure, { staleSocket: true });
        // Refused: nothing of the request reached the server (another server may take it).
        if (err.code === "ECONNREFUSED") Object.assign(failure, { notSent: true });
        reject(failure);
      });
      req.end(payload);
    });
  }
}

function midResponseFailure(signal: AbortSignal): ProviderFailure {
  return signal.aborted ? abortReason(signal) : new ProviderFailure("error", "Model provider closed the connection mid-response");
}

/**
 * The whole body as text (at most `limit` bytes). Read with listeners rather than an async
 * iterator: a small JSON answer is the hot path, and the iterator's promises per chunk cost more
 * than the reading.
 */
export function readText(res: IncomingMessage, signal: AbortSignal, limit = MAX_BODY_BYTES): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    // The failure is built only when it is the outcome: an Error's stack costs more than the read.
    const fail = (failure: () => ProviderFailure) => {
      if (settled) return;
      settled = true;
      reject(failure());
    };
    const cut = () => fail(() => midResponseFailure(signal));
    res.on("data", (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > limit) {
        fail(() => new ProviderFailure("error", "Model provider answer is too large"));
        res.destroy();
        return;
      }
      chunks.push(chunk);
    });
    res.once("end", () => {
      if (settled) return;
      settled = true;
      resolve(chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8"));
    });
    // An error, or a close before the end (the connection cut, the request aborted): mid-response.
    res.once("error", cut);
    res.once("close", cut);
  });
}

export async function readJson(res: IncomingMessage, signal: AbortSignal): Promise<unknown> {
  const text = await readText(res, signal);
  try {
    return JSON.parse(text);
  } catch {
    throw new ProviderFailure("error", "Model provider returned malformed JSON");
  }
}

/**
 * The failure for a provider's HTTP error answer. `messageOf` digs the provider's own message out
 * of its error body; it reaches the client only after scrubbing (see errors.ts).
 */
export async function httpFailure(res: IncomingMessage, signal: AbortSignal, messageOf: (body: unknown) => string | undefined): Promise<ProviderFailure> {
  const status = res.statusCode ?? 0;
  let message: string | undefined;
  try {
    const text = await readText(res, signal, MAX_ERROR_BODY_BYTES);
    try {
      message = messageOf(JSON.parse(text));
    } catch {
      message = undefined;
    }
  } catch (err) {
    if (signal.aborted) return abortReason(signal);
  }
  const text = message ? `Model provider answered ${status}: ${message}` : `Model provider answered ${status}`;
  return new ProviderFailure(status === 404 ? "not_found" : "error", text, status);
}

/** The body's lines as they arrive (NDJSON, SSE), without the line break. */
export async function* readLines(res: IncomingMessage, signal: AbortSignal): AsyncGenerator<string> {
  const decoder = new StringDecoder("utf8");
  let buffered = "";
  const iterator = res[Symbol.asyncIterator]();
  try {
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await iterator.next();
      } catch {
        throw midResponseFailure(signal);
      }
      if (next.done) break;
      buffered += decoder.write(next.value);
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.charCodeAt(nl - 1) === 13 ? buffered.slice(0, nl - 1) : buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        yield line;
      }
    }
    buffered += decoder.end();
    if (buffered) yield buffered;
  } finally {
    // A consumer that stops early must not leave the provider's response (and socket) open.
    if (!res.complete) res.destroy();
  }
}
