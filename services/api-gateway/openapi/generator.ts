/**
 * Builds the OpenAPI 3.1 document from the routes the gateway serves right now (aliases with
 * their actions' `params`, `auth` and `openapi`) and the gateway's own catalogue. Pure: the
 * gateway hands it the routes, so the document follows services as they come and go.
 */
import type { ActionSchema } from "moleculer";
import type { ApiTag } from "../../../lib/contract";
import { ErrorCode, ErrorCodes } from "../../../lib/errors";
import type { AuthPolicy } from "../../../lib/identity";
import { policyOf } from "../../../middlewares/auth.middleware";
import { OPENAI_ERROR, V1_OPERATIONS } from "./openai";
import { ANY_REQUEST_ERRORS, ErrorShape, Operation, OPERATIONS, SCHEMAS } from "./responses";
import { bodySchema, JsonSchema, paramFields } from "./schema";

export type LiveRoute = {
  method: string;
  /** As moleculer-web writes it: `/api/gpu/jobs/:id`. */
  path: string;
  /** The action behind the route; absent for the gateway's own handlers (the docs). */
  action?: { name: string; params?: Record<string, unknown>; auth?: AuthPolicy; rest?: unknown; openapi?: Operation };
};

export type OpenApiDocument = {
  openapi: string;
  info: Record<string, unknown>;
  paths: Record<string, Record<string, OperationObject>>;
  components: Record<string, unknown>;
  [key: string]: unknown;
};

export type OperationObject = {
  operationId: string;
  summary?: string;
  tags?: string[];
  security: Array<Record<string, string[]>>;
  parameters?: unknown[];
  requestBody?: unknown;
  responses: Record<string, unknown>;
  "x-undocumented"?: true;
  [key: string]: unknown;
};

const BODY_METHODS = new Set(["POST", "PUT", "PATCH"]);
const METHOD_ORDER = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** `/api/gpu/jobs/:id` → `/api/gpu/jobs/{id}` */
export const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)\??/g, "{$1}");

function securityOf(policy: AuthPolicy): Array<Record<string, string[]>> {
  if (policy === "public") return [];
  if (policy === "jwt") return [{ bearerAuth: [] }];
  return [{ bearerAuth: [] }, { apiKey: [] }];
}

/** Errors any route of this kind can answer, besides the catalogue's own; `hasParams`: fields to validate, or unknown ones to refuse. */
function implicitErrors(route: LiveRoute, policy: AuthPolicy, hasParams: boolean): ErrorCode[] {
  if (!route.action) return ["INTERNAL"];
  const codes: ErrorCode[] = [];
  if (hasParams) codes.push("VALIDATION_FAILED");
  if (BODY_METHODS.has(route.method)) codes.push("INVALID_JSON", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE");
  if (policy !== "public") codes.push("UNAUTHORIZED");
  if (policy === "jwt" || policy === "admin") codes.push("FORBIDDEN");
  codes.push("INTERNAL", "SERVICE_UNAVAILABLE");
  return codes;
}

const REQUEST_ID_HEADER = { "X-Request-Id": { $ref: "#/components/headers/XRequestId" } };

/** `shape`: a route answering another API's errors (/v1: lib/openai-errors.ts, lib/anthropic-errors.ts), the codes then only named in the description. */
function errorResponses(codes: ErrorCode[], shape?: ErrorShape): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = shape?.status ? shape.status(ErrorCodes[code]) : ErrorCodes[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const headers: Record<string, unknown> = { ...REQUEST_ID_HEADER };
    if (list.includes("RATE_LIMITED")) headers["Retry-After"] = { $ref: "#/components/headers/RetryAfter" };
    responses[String(status)] = {
      description: list.join(", "),
      headers,
      content: {
        "application/json": {
          schema: shape ? ref(shape.name) : { allOf: [ref("Error"), { properties: { error: { properties: { code: { enum: list } } } } }] },
        },
      },
    };
  }
  return responses;
}

/** `components.responses`: the errors of ANY_REQUEST_ERRORS, which any route may answer. */
function anyRequestResponses(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(ANY_REQUEST_ERRORS)) {
    const [status, response] = Object.entries(errorResponses([entry.code]))[0] as [string, { headers: Record<string, unknown> }];
    const headers = entry.retryAfter ? { ...response.headers, "Retry-After": { $ref: "#/components/headers/RetryAfter" } } : response.headers;
    out[name] = { ...response, headers, description: `${status} ${entry.code}: ${entry.description}` };
  }
  return out;
}

/**
 * A schema as published: a plain copy (without TypeBox's Symbol keys, which exist in-process only),
 * each part with a `$id` moved to `named` and referenced by that name.
 */
export function publish(schema: unknown, named: Record<string, JsonSchema>): unknown {
  if (Array.isArray(schema)) return schema.map((s) => publish(s, named));
  if (!schema || typeof schema !== "object") return schema;
  const source = schema as Record<string, unknown>;
  const id = typeof source.$id === "string" ? source.$id : undefined;
  const copy: JsonSchema = {};
  for (const key of Object.keys(source)) if (!(id && key === "$id")) copy[key] = publish(source[key], named);
  if (!id) return copy;
  named[id] ??= copy;
  return ref(id);
}

function successResponse(op: Operation, named: Record<string, JsonSchema>): Record<string, unknown> {
  const schema = typeof op.response === "string" ? ref(op.response) : publish(op.response, named);
  const content: Record<string, unknown> = { [op.contentType ?? "application/json"]: { schema } };
  let description = op.summary;
  for (const [type, alt] of Object.entries(op.alternatives ?? {})) {
    content[type] = { schema: publish(alt.schema, named) };
    description += `. ${alt.description}`;
  }
  return { [String(op.status)]: { description, headers: REQUEST_ID_HEADER, content } };
}

function operationOf(route: LiveRoute, path: string, op: Operation | undefined, named: Record<string, JsonSchema>): OperationObject {
  const policy: AuthPolicy = route.action ? (policyOf(route.action as ActionSchema) ?? "required") : "public";
  const fields = paramFields(route.action?.params);
  const pathNames = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const parameters: unknown[] = pathNames.map((name) => ({
    name,
    in: "path",
    required: true,
    schema: fields.find((f) => f.name === name)?.schema ?? { type: "string" },
  }));
  const rest = fields.filter((f) => !pathNames.includes(f.name));
  let requestBody: unknown;
  if (op?.request) requestBody = { required: true, content: { [op.requestType ?? "application/json"]: { schema: publish(op.request, named) } } };
  else if (BODY_METHODS.has(route.method)) {
    if (rest.length) requestBody = { required: rest.some((f) => f.required), content: { "application/json": { schema: bodySchema(rest) } } };
  } else {
    for (const f of rest) parameters.push({ name: f.name, in: "query", required: f.required, schema: f.schema });
  }
  // A REST-facing action refuses fields it does not know (lib/params-validator.ts): 400 even without params.
  const validates = fields.length > 0 || op?.request !== undefined || Boolean(route.action?.rest);
  const errors = [...implicitErrors(route, policy, validates), ...(op?.errors ?? [])];
  const operation: OperationObject = {
    operationId: route.action?.name ?? `${route.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c?: string) => (c ?? "").toUpperCase())}`,
    ...(op ? { tags: [op.tag], summary: op.summary } : { "x-undocumented": true as const }),
    ...(op?.description ? { description: op.description } : {}),
    security: securityOf(policy),
    ...(parameters.length ? { parameters } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses: {
      ...(op ? successResponse(op, named) : { default: { description: "Not documented yet" } }),
      ...errorResponses(errors, errorShapeOf(path, op)),
    },
  };
  return operation;
}

const V1 = "/v1";
/** The /v1 routes answer OpenAI's errors unless their documentation names another API's. */
const errorShapeOf = (path: string, op: Operation | undefined) => op?.errorShape ?? (path.startsWith(`${V1}/`) ? OPENAI_ERROR : undefined);

const TAGS: Array<{ name: ApiTag | "openai" | "anthropic"; description: string }> = [
  { name: "auth", description: "Accounts, JWT access tokens and API keys" },
  { name: "gpu", description: "GPU jobs and cluster status" },
  { name: "models", description: "Hosted model inference" },
  { name: "databases", description: "On-demand PostgreSQL databases" },
  { name: "admin", description: "Operators (role admin, from ADMIN_EMAILS): nodes, all jobs, accounts" },
  { name: "usage", description: "Usage, credits and quotas of the account" },
  { name: "openai", description: "The OpenAI-compatible API under /v1: OpenAI's request, response and error shapes" },
  { name: "anthropic", description: "Anthropic's Messages API (/v1/messages): Anthropic's request, response and error shapes" },
  { name: "reference", description: "This reference" },
];

export function buildOpenApi(routes: LiveRoute[], opts: { version: string; catalogue?: Record<string, Operation> }): OpenApiDocument {
  const catalogue = opts.catalogue ?? { ...OPERATIONS, ...V1_OPERATIONS };
  // The shared error shapes, then every named schema of the live routes' responses.
  const named: Record<string, JsonSchema> = { ...SCHEMAS };
  const paths: Record<string, Record<string, OperationObject>> = {};
  const order = (r: LiveRoute) => `${toOpenApiPath(r.path)} ${METHOD_ORDER.indexOf(r.method.toUpperCase())}`;
  const sorted = [...routes].sort((a, b) => order(a).localeCompare(order(b)));
  for (const route of sorted) {
    const method = route.method.toUpperCase();
    const path = toOpenApiPath(route.path);
    // An action's route is documented on the action; the gateway's own handlers and aliases (/v1) in its catalogue.
    const op = catalogue[`${method} ${path}`] ?? route.action?.openapi;
    if (op?.hidden) continue;
    (paths[path] ??= {})[method.toLowerCase()] = operationOf({ ...route, method }, path, op, named);
    const shape = errorShapeOf(path, op);
    if (shape) named[shape.name] = shape.schema;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "ci-platform API",
      version: opts.version,
      description:
        "Accounts, GPU jobs, LLM inference and on-demand PostgreSQL databases behind one HTTP API. " +
        'Every error is `{"error": {"code", "message", "details"}}`; every response carries X-Request-Id. ' +
        "Besides each operation's own errors, any request may get those under `components.responses` " +
        "(malformed HTTP, timeouts, oversized headers or parameters, NUL or unpaired surrogates in any string, the connection cap). " +
        "The OpenAI-compatible API under /v1 (models, chat completions, responses, embeddings) takes and answers OpenAI's shapes, " +
        'its errors included: `{"error": {"message", "type", "param", "code"}}` (tag openai); /v1/messages is Anthropic\'s Messages API, ' +
        'its errors `{"type": "error", "error": {"type", "message"}, "request_id"}` (tag anthropic).',
    },
    servers: [{ url: "/" }],
    tags: TAGS,
    paths,
    components: {
      schemas: named,
      responses: anyRequestResponses(),
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "`Authorization: Bearer <accessToken>` (from register or login), or `Bearer ci_…` (an API key)",
        },
        apiKey: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description: "An API key `ci_…` (from POST /api/auth/api-keys); Anthropic's clients send it so (`x-api-key`)",
        },
      },
      headers: {
        XRequestId: { description: "The request id (yours, echoed, when well-formed)", schema: { type: "string" } },
        RetryAfter: { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 1 } },
      },
    },
  };
}

export type { JsonSchema };
