/**
 * The checks the gateway makes on a request before it calls a service (both the /api and /v1
 * routes' onBeforeCall): a JSON object body (or multipart for a stream alias), valid UTF-8,
 * forwardable params that fit a bus message, the client's address and idempotency key.
 */
import { isUtf8 } from "buffer";
import type { IncomingMessage, ServerResponse } from "http";
import type { ActionSchema, Context } from "moleculer";
import { apiError, validationFailed } from "../../lib/errors";
import { findUnstorable, jsonSize, markClean } from "../../lib/input-guard";
import type { CallerMeta } from "../../lib/identity";
import type { GatewaySettings } from "./settings";

export type GatewayMeta = CallerMeta & { authError?: string; $multipartType?: string };
export type Req = IncomingMessage & { $ctx?: Context; $action?: ActionSchema; $params?: unknown; body?: unknown; requestId?: string };

const BODY_METHODS = new Set(["POST", "PUT", "PATCH"]);

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}

function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = req.headers["x-forwarded-for"];
    if (typeof forwarded === "string" && forwarded) return forwarded.split(",")[0].trim();
  }
  return req.socket.remoteAddress ?? "unknown";
}

/**
 * body-parser decodes invalid UTF-8 as U+FFFD (three bytes each on the bus): such a body is
 * refused instead. Its `type` is mapped to 400 INVALID_JSON by the error mapper.
 */
export function requireUtf8(_req: IncomingMessage, _res: ServerResponse, buf: Buffer): void {
  if (!isUtf8(buf)) throw Object.assign(new Error("Request body is not valid UTF-8"), { status: 400, type: "entity.invalid.utf8" });
}

/** What the gateway forwards must be storable text and fit a bus message: refused here, before any call. */
function checkForwarded(params: unknown, maxBytes: number): void {
  const problems = findUnstorable(params);
  if (problems.length) throw validationFailed(problems, "Request contains text that cannot be accepted");
  const size = jsonSize(params);
  if (size > maxBytes) throw apiError("PAYLOAD_TOO_LARGE", `Request parameters are larger than ${maxBytes} bytes`);
  markClean(params);
}

/**
 * Both routes, before the call: a JSON object body (a stream alias, POST /v1/files: multipart, read
 * by the action itself), forwardable params, the client's address and idempotency key.
 */
export function checkRequest(
  this: { config: GatewaySettings },
  ctx: Context<unknown, GatewayMeta>,
  _route: unknown,
  req: Req,
  _res: unknown,
  alias?: { type?: string },
) {
  if (alias?.type === "stream") {
    const type = req.headers["content-type"] ?? "";
    if (!/^multipart\/form-data\b/i.test(type)) throw apiError("UNSUPPORTED_MEDIA_TYPE", "Request body must be multipart/form-data");
    ctx.meta.$multipartType = type;
  } else if (BODY_METHODS.has(req.method ?? "") && hasBody(req)) {
    const type = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
    if (type !== "application/json") throw apiError("UNSUPPORTED_MEDIA_TYPE", "Request body must be application/json");
    if (req.body === null || typeof req.body !== "object" || Array.isArray(req.body)) throw apiError("INVALID_JSON", "Request body must be a JSON object");
  }
  checkForwarded(req.$params, this.config.maxParamsBytes);
  ctx.meta.clientIp = clientAddress(req, this.config.trustProxy);
  const idempotencyKey = req.headers["idempotency-key"];
  // Node joins a repeated header with ", " (which the key check then refuses).
  if (typeof idempotencyKey === "string") ctx.meta.idempotencyKey = idempotencyKey;
}
