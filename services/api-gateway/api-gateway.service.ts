/**
 * The HTTP entry point. Routes come from the services' own actions (`rest:` + `settings.rest`),
 * so a service adds its endpoints by existing. The gateway resolves the caller once per request
 * (JWT or API key) into ctx.meta.caller; the Auth middleware enforces each action's policy.
 */
import { randomUUID } from "crypto";
import type { IncomingMessage, ServerResponse } from "http";
import type { Context, Service, ServiceSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import { apiError } from "../../lib/errors";
import { RestBase, serviceOwning } from "../../lib/service-routes";
import { CallerKeySettings, callerSigner } from "../../lib/caller-keys";
import { addReadinessCheck } from "../../lib/health";
import { logAccess, logsInfo } from "../../lib/logging";
import { platformSettingsOf } from "../../lib/platform-settings";
import { brokerEnv } from "../../lib/settings";
import { API_KEY_REPLACED, TOKEN_REVOKED } from "../../lib/event-names";
import { CallerResolver, gatewayCallerResolver } from "./caller-resolver";
import { readCredentials } from "./credentials";
import { consoleRoute } from "./console";
import { docsRoute } from "./docs";
import { createHardenedServer } from "./http-server";
import { routesReadiness } from "./readiness";
import { toPublicError } from "./error-mapper";
import { openAiError } from "../../lib/openai-errors";
import { anthropicError } from "../../lib/anthropic-errors";
import { watchStream } from "./streaming";
import { StreamSlots, streamsFor } from "./stream-slots";
import { pagedBody } from "../../lib/paged-body";
import { GatewaySettings, parseGatewaySettings } from "./settings";
import { GatewayMeta, Req, checkRequest, requireUtf8 } from "./request-checks";

/** What the gateway keeps from its settings and the composition root (created in createServer, see there). */
type GatewayThis = Service & {
  config: GatewaySettings;
  keys: CallerKeySettings;
  resolver: CallerResolver<Context>;
  streams: StreamSlots;
};

const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;
/** The OpenAI-compatible API's prefix: its errors, unrouted paths included, speak OpenAI's shape. */
const V1_PREFIX = "/v1";
/** Anthropic's Messages API, within /v1: its errors speak Anthropic's shape (lib/anthropic-errors.ts). */
const MESSAGES_PREFIX = `${V1_PREFIX}/messages`;
const pathOf = (req: Req & { originalUrl?: string }) => (req.originalUrl ?? req.url ?? "").split("?")[0];
const under = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}/`);

type Unrouted = { name?: string; type?: string };

/** An unrouted path under a platform service that has no instance now (stopped, restarting). */
function ownerDown(gateway: Service, req: Req & { originalUrl?: string }, err: unknown): boolean {
  const e = err as Unrouted;
  if (e?.name !== "NotFoundError" || e.type !== "NOT_FOUND") return false;
  const owner = serviceOwning((req.originalUrl ?? req.url ?? "").split("?")[0], (gateway.settings.restBases ?? []) as RestBase[]);
  // hasService exists on moleculer's registry but is missing from its type declarations.
  const registry = gateway.broker.registry as unknown as { hasService(name: string): boolean };
  return owner !== undefined && !registry.hasService(owner);
}

/** Both routes, after the call: streamed answers (SSE) cancel their producer when the client goes away (streaming.ts). */
function answerWith(this: GatewayThis, ctx: Context, _route: unknown, _req: Req, res: ServerResponse, data: unknown) {
  // A paged answer (job logs) becomes a stream that fetches each page as the client reads;
  // a slow reader outlives the signed caller token, so each page call carries a fresh one.
  const meta = ctx.meta as GatewayMeta;
  const body = pagedBody(ctx, data, () => {
    if (meta.caller) meta.callerToken = callerSigner(this.keys).tokenFor(meta.caller);
  });
  watchStream(ctx, res, body, this.logger);
  return body;
}

/** What the /api and /v1 routes share: credentials, JSON bodies, the checks around each call. */
const SERVICE_ROUTE = {
  mappingPolicy: "restrict",
  authentication: true,
  authorization: false,
  logging: false,
  bodyParsers: { json: { limit: "1mb", strict: true, verify: requireUtf8 }, urlencoded: false },
  // A call to a process that died without saying so must not hang: GATEWAY_TIMEOUT_MS (503), set in createServer().
  callOptions: { timeout: 150_000 },
  onBeforeCall: checkRequest,
  onAfterCall: answerWith,
};

const GatewayService: ServiceSchema = {
  name: "api-gateway",
  mixins: [ApiGateway],

  settings: {
    port: 3000, // replaced by PORT in createServer()
    ip: "0.0.0.0", // replaced by HOST in createServer()
    // [base, service] of every platform service's REST paths: given by the composition root (moleculer.config.ts).
    restBases: [],
    // Every response carries X-Request-Id: taken from the client when well-formed, else generated.
    rootCallOptions(this: Service, options: { requestID?: string }, req: Req, res: ServerResponse) {
      const sent = req.headers["x-request-id"];
      const id = typeof sent === "string" && REQUEST_ID.test(sent) ? sent : randomUUID();
      options.requestID = id;
      req.requestId = id;
      res.setHeader("X-Request-Id", id);
      if (this.settings.accessLog) logAccess(this.logger, req, res, id);
    },
    routes: [
      {
        path: "/api",
        // Every service's REST actions except the gateway's own (listAliases).
        whitelist: [/^(?!api-gateway\.)/],
        autoAliases: true,
        ...SERVICE_ROUTE,
      },
      // The OpenAI-compatible API (README "OpenAI-compatible API"): outside /api, errors in OpenAI's shape (onError),
      // and Anthropic's Messages API (/v1/messages), errors in Anthropic's.
      {
        path: V1_PREFIX,
        aliases: {
          "GET /models": "inference.v1Models",
          "POST /chat/completions": "inference.v1ChatCompletions",
          "POST /responses": "inference.v1Responses",
          "POST /embeddings": "inference.v1Embeddings",
          "POST /messages": "inference.v1Messages",
          // The Batch API: the upload's body is streamed to the inference service as it comes (up to 100 MiB).
          "POST /files": "stream:inference.v1FilesCreate",
          "GET /files": "inference.v1FilesList",
          "GET /files/:id": "inference.v1FilesGet",
          "GET /files/:id/content": "inference.v1FilesContent",
          "DELETE /files/:id": "inference.v1FilesDelete",
          "POST /batches": "inference.v1BatchesCreate",
          "GET /batches": "inference.v1BatchesList",
          "GET /batches/:id": "inference.v1BatchesGet",
          "POST /batches/:id/cancel": "inference.v1BatchesCancel",
          // A batch's status as server-sent events (docs/inference.md "Batch API").
          "GET /batches/:id/events": "inference.v1BatchesEvents",
        },
        ...SERVICE_ROUTE,
      },
      // GET /api/openapi.json and the reference page /api/docs (docs.ts).
      docsRoute(),
      // The web console /console (console.ts): static files, its own CSP.
      consoleRoute(),
    ],
    // Regenerate routes quickly when services come and go.
    debounceTime: 100,
    log4XXResponses: false,
    logRequest: null,
    logResponse: null,

    onError(this: Service, req: Req, res: ServerResponse, err: unknown) {
      const requestId = req.requestId ?? randomUUID();
      const pub = toPublicError(ownerDown(this, req, err) ? apiError("SERVICE_UNAVAILABLE", "Service temporarily unavailable, retry later") : err, requestId);
      if (pub.internal) {
        const e = err as Error;
        this.logger.error({ requestId }, `Request ${requestId} failed: ${e?.name}: ${e?.message}`, e?.stack);
      } else if (pub.status >= 500) {
        // Expected server-side failures (a service down, a provider timing out): one line, no stack.
        this.logger.warn({ requestId }, `Request ${requestId}: ${pub.status} ${pub.body.error.code} (${(err as Error)?.message})`);
      }
      if (res.headersSent) {
        res.end();
        return;
      }
      res.setHeader("X-Request-Id", requestId);
      for (const [name, value] of Object.entries(pub.headers)) res.setHeader(name, value);
      res.setHeader("Content-Type", "application/json; charset=utf-8");
      const { code, message, details } = pub.body.error;
      const path = pathOf(req);
      if (under(path, MESSAGES_PREFIX)) {
        const anthropic = anthropicError(pub.status, message, details, requestId);
        res.writeHead(anthropic.status);
        res.end(JSON.stringify(anthropic.body));
        return;
      }
      res.writeHead(pub.status);
      res.end(JSON.stringify(under(path, V1_PREFIX) ? openAiError(pub.status, code, message, details) : pub.body));
    },
  },

  events: {
    /** auth replaced an account's key: this replica stops trusting what it cached for that account (caller-resolver.ts). */
    [API_KEY_REPLACED]: {
      handler(this: GatewayThis, ctx: Context<{ clientId?: unknown }>) {
        const { clientId } = ctx.params ?? {};
        if (typeof clientId === "string") this.resolver?.keyReplaced(clientId);
        else this.logger.warn(`${API_KEY_REPLACED} without a clientId: ignored`);
      },
    },
    /** auth deleted restricted tokens: this replica stops trusting what it cached for them. */
    [TOKEN_REVOKED]: {
      handler(this: GatewayThis, ctx: Context<{ tokens?: unknown }>) {
        const { tokens } = ctx.params ?? {};
        if (!Array.isArray(tokens)) return this.logger.warn(`${TOKEN_REVOKED} without tokens: ignored`);
        for (const t of tokens) if (typeof t?.id === "string") this.resolver?.tokenRevoked(t.id);
      },
    },
  },

  methods: {
    /** moleculer-web logs every non-4xx error with its stack here; onError logs the unexpected ones, once. */
    errorHandler(this: Service & { sendError(req: Req, res: ServerResponse, err: unknown): void }, req: Req, res: ServerResponse, err: unknown) {
      this.sendError(req, res, err);
    },

    /**
     * Replaces moleculer-web's server: timeouts, connection cap, JSON errors. moleculer-web's
     * created() calls it first, before it reads the routes: the gateway's settings are parsed here.
     */
    createServer(this: GatewayThis & { server?: unknown; httpHandler(req: IncomingMessage, res: ServerResponse): void }) {
      if (this.server) return;
      const config = (this.config = parseGatewaySettings(brokerEnv(this.broker)));
      const platform = platformSettingsOf(this.broker);
      this.keys = platform;
      this.resolver = gatewayCallerResolver(config.jwtSecret, config.apiKeyCacheMs);
      this.streams = new StreamSlots(config.streamsPerAccount);
      this.settings.port = config.port;
      this.settings.ip = config.host;
      // The /api and /v1 routes (settings are this instance's own copy: moleculer merges mixins into clones).
      for (const route of this.settings.routes.slice(0, 2)) route.callOptions = { timeout: config.timeoutMs };
      // Below info level the access line would be dropped: skip its timer and listener per request.
      this.settings.accessLog = logsInfo(platform.logLevel);
      const limits = {
        headersTimeoutMs: config.headersTimeoutMs,
        requestTimeoutMs: config.requestTimeoutMs,
        keepAliveTimeoutMs: config.keepAliveTimeoutMs,
        maxConnections: config.maxConnections,
      };
      this.server = createHardenedServer(limits, (req, res) => this.httpHandler(req, res), this.logger);
    },

    /**
     * Resolves the caller, or records why the credentials were refused: a public action still
     * answers, a protected one gets 401 from the Auth middleware with that reason. A call answered
     * with a stream holds one of its account's slots until the response closes (stream-slots.ts).
     */
    async authenticate(this: GatewayThis, ctx: Context<unknown, GatewayMeta>, _route: unknown, req: Req, res: ServerResponse): Promise<null> {
      const resolved = await this.resolver.resolve(readCredentials(req.headers), ctx);
      if ("caller" in resolved) {
        if (streamsFor(req.$action, req.$params)) this.streams.hold(resolved.caller.clientId, res);
        // Services trust only the signed token (middlewares/auth.middleware.ts); caller is for the gateway itself.
        ctx.meta.caller = resolved.caller;
        ctx.meta.callerToken = callerSigner(this.keys).tokenFor(resolved.caller);
      } else if ("refusal" in resolved) throw resolved.refusal;
      else if (resolved.error) ctx.meta.authError = resolved.error;
      return null;
    },
  },

  created(this: Service) {
    addReadinessCheck(this, "routes", routesReadiness(this as never));
  },

  stopped(this: Service & { regenerateAllAutoAliases?: (() => void) & { cancel(): void } }) {
    // moleculer-web regenerates routes 500 ms after services change (debounced), and services keep
    // stopping after the gateway: a stopped gateway must not regenerate (and log) later.
    this.regenerateAllAutoAliases?.cancel();
    this.regenerateAllAutoAliases = Object.assign(() => undefined, { cancel: () => undefined });
  },
};

export default GatewayService;
