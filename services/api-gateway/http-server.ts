/**
 * The gateway's HTTP server, hardened below the routes: slow clients are cut off (headers and
 * request timeouts, idle keep-alive), open connections are capped, and what Node's HTTP parser
 * refuses (headers too large, malformed requests, timeouts) is answered in the error contract's
 * shape with an X-Request-Id, instead of Node's bare status line.
 */
import { randomUUID } from "crypto";
import http, { IncomingMessage, ServerResponse } from "http";
import type { Socket } from "net";
import type { LoggerInstance } from "moleculer";
import { ErrorCode, ErrorCodes } from "../../lib/errors";

export type HttpLimits = {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
};

/** A refused connection gets this long to read its answer before it is closed. */
const REFUSED_LINGER_MS = 1000;
const refused = new WeakSet<Socket>();

type ErrorAnswer = { status: number; headers: Record<string, string>; body: string };

/** The contract's JSON error, closing the connection. */
function errorAnswer(code: ErrorCode, message: string, requestId: string, extraHeaders: Record<string, string> = {}): ErrorAnswer {
  const body = JSON.stringify({ error: { code, message, details: null } });
  const headers = {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(body)),
    "X-Request-Id": requestId,
    Connection: "close",
    ...extraHeaders,
  };
  return { status: ErrorCodes[code], headers, body };
}

/** A complete HTTP/1.1 response for a connection with no request object. */
export function rawErrorResponse(code: ErrorCode, message: string, requestId: string, extraHeaders: Record<string, string> = {}): string {
  const { status, headers, body } = errorAnswer(code, message, requestId, extraHeaders);
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  return [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? "Error"}`, ...head, "", body].join("\r\n");
}

/** What Node's parser error means for the client (its codes: llhttp's HPE_*, and Node's own). */
export function classifyClientError(nodeCode: string | undefined): { code: ErrorCode; message: string } | null {
  switch (nodeCode) {
    case "ECONNRESET":
    case "EPIPE":
      return null; // the client is gone: nothing to answer
    case "HPE_HEADER_OVERFLOW":
      return { code: "HEADERS_TOO_LARGE", message: "Request headers are larger than the server accepts" };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { code: "REQUEST_TIMEOUT", message: "The request was not received in time" };
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return { code: "PAYLOAD_TOO_LARGE", message: "Chunk extensions are larger than the server accepts" };
    default:
      return { code: "MALFORMED_REQUEST", message: "Malformed HTTP request" };
  }
}

/** The same answer on a request's own response object (requests Node refuses after parsing them). */
function respond(res: ServerResponse, code: ErrorCode, message: string): void {
  const { status, headers, body } = errorAnswer(code, message, randomUUID());
  res.shouldKeepAlive = false;
  res.writeHead(status, headers);
  res.end(body);
}

/** Writes `response` and closes; the client gets a moment to read it before the socket is destroyed. */
function answerAndClose(socket: Socket, response: string): void {
  socket.end(response);
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
}

/** Whether a response is already under way on this connection (then raw bytes would corrupt it). */
function responseStarted(socket: Socket): boolean {
  const current = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  return Boolean(current?.headersSent);
}

/**
 * An http.Server with the limits applied; `handler` serves the requests of admitted connections.
 * (connectionsCheckingInterval can only be given at creation: it bounds how late a timeout is noticed.)
 */
export function createHardenedServer(limits: HttpLimits, handler: (req: IncomingMessage, res: ServerResponse) => void, logger: LoggerInstance): http.Server {
  const requestTimeout = limits.requestTimeoutMs;
  // Node refuses a headers timeout longer than the request timeout.
  const headersTimeout = requestTimeout > 0 ? Math.min(limits.headersTimeoutMs, requestTimeout) : limits.headersTimeoutMs;
  const shortest = Math.min(...[headersTimeout, requestTimeout].filter((t) => t > 0), 120_000);
  const server = http.createServer(
    {
      headersTimeout,
      requestTimeout,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(5_000, Math.floor(shortest / 4))),
      // Checked below instead, so the answer is the contract's JSON rather than Node's empty 400.
      requireHostHeader: false,
    },
    (req, res) => {
      // A refused connection may still deliver a request: it must not reach any service.
      if (refused.has(req.socket)) return void res.destroy();
      if (req.httpVersion === "1.1" && req.headers.host === undefined) return respond(res, "MALFORMED_REQUEST", "An HTTP/1.1 request needs a Host header");
      handler(req, res);
    },
  );
  // Node's own answers to these are bodiless: give them the contract's shape.
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => respond(res, "EXPECTATION_FAILED", 'Only "Expect: 100-continue" is supported'));
  server.on("connect", (_req: IncomingMessage, socket: Socket) =>
    answerAndClose(socket, rawErrorResponse("MALFORMED_REQUEST", "CONNECT is not supported: this server is not a proxy", randomUUID())),
  );

  let open = 0;
  let lastRefusalLog = 0;
  server.on("connection", (socket: Socket) => {
    if (limits.maxConnections > 0 && open >= limits.maxConnections) {
      refused.add(socket);
      // A flood must not flood the log too: one line per 10 s.
      if (Date.now() - lastRefusalLog > 10_000) {
        lastRefusalLog = Date.now();
        logger.warn(`Refusing connections: ${open} open, the limit (GATEWAY_MAX_CONNECTIONS) is ${limits.maxConnections}`);
      }
      return answerAndClose(socket, rawErrorResponse("SERVICE_UNAVAILABLE", "Too many open connections, retry later", randomUUID(), { "Retry-After": "1" }));
    }
    open += 1;
    socket.once("close", () => (open -= 1));
  });

  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    const answer = classifyClientError(err.code);
    if (!answer || !socket.writable || responseStarted(socket)) return void socket.destroy();
    const requestId = randomUUID();
    logger.debug(`HTTP client error ${err.code ?? err.message} from ${socket.remoteAddress} (request ${requestId})`);
    answerAndClose(socket, rawErrorResponse(answer.code, answer.message, requestId));
  });

  return server;
}
