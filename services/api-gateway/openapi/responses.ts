/**
 * The gateway's own part of the OpenAPI document: the error shape every route shares, the errors
 * any request can get, and its own routes (the reference itself). A service's route is documented
 * on its action (`openapi`, lib/contract.ts), beside its `rest` and `params`.
 * OPERATIONS is keyed by "METHOD /api/path" as the gateway serves it; the drift test fails for a
 * live route documented neither here nor on its action, and for an entry here without a route.
 */
import type { RouteDoc } from "../../../lib/contract";
import type { ErrorCode } from "../../../lib/errors";
import type { JsonSchema } from "./schema";

/** A route's documentation: an entry here, or an action's `openapi` (RouteDoc) as the registry carries it. */
export type Operation = Omit<RouteDoc, "tag" | "response" | "alternatives"> & {
  tag: string;
  /** A `#/components/schemas/X` name, or a schema (those inside it with `$id` are published under that name). */
  response: string | JsonSchema;
  alternatives?: Record<string, { schema: JsonSchema; description: string }>;
  /** The JSON request body, for a route whose action parses its own (the /v1 routes, openai.ts). */
  request?: JsonSchema;
  /** The request body's media type (default application/json; POST /v1/files: multipart/form-data). */
  requestType?: string;
  /** Served but not part of the document (static assets of the docs page). */
  hidden?: true;
  /** Errors in another API's shape (the /v1 routes: OpenAI's unless said otherwise). */
  errorShape?: ErrorShape;
};

/** Another API's error body (published under `name`) and the status it answers for the platform's (by default the same). */
export type ErrorShape = { name: string; schema: JsonSchema; status?: (platformStatus: number) => number };

export const SCHEMAS: Record<string, JsonSchema> = {
  Error: {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["code", "message", "details"],
        properties: {
          code: { type: "string", pattern: "^[A-Z][A-Z0-9_]*$", description: "Stable machine word" },
          message: { type: "string", description: "For people" },
          details: {
            description: "null, or structured: for VALIDATION_FAILED a list of {field, message}; for INTERNAL {requestId}",
            oneOf: [{ type: "null" }, { type: "array", items: { $ref: "#/components/schemas/FieldError" } }, { type: "object" }],
          },
        },
      },
    },
  },
  FieldError: {
    type: "object",
    required: ["field", "message"],
    properties: { field: { type: "string" }, message: { type: "string" } },
  },
};

/**
 * Errors any request can get whatever its route: answered on the connection before routing
 * (services/api-gateway/http-server.ts), or by the input checks every action shares
 * (middlewares/input.middleware.ts). Published once as `components.responses`, not per operation.
 */
export const ANY_REQUEST_ERRORS: Record<string, { code: ErrorCode; description: string; retryAfter?: true }> = {
  MalformedRequest: { code: "MALFORMED_REQUEST", description: "Not HTTP the server can parse (answered before routing; the connection is closed)" },
  UnstorableText: {
    code: "VALIDATION_FAILED",
    description: "A NUL character or an unpaired UTF-16 surrogate in any string (body, query, path, nested fields and field names); `details` names the fields",
  },
  RequestTimeout: {
    code: "REQUEST_TIMEOUT",
    description: "Headers (GATEWAY_HEADERS_TIMEOUT_MS) or the whole request (GATEWAY_REQUEST_TIMEOUT_MS) not received in time",
  },
  ParamsTooLarge: { code: "PAYLOAD_TOO_LARGE", description: "Body over 1 MiB (after decoding Content-Encoding), or parameters over GATEWAY_MAX_PARAMS_BYTES" },
  HeadersTooLarge: { code: "HEADERS_TOO_LARGE", description: "Request headers over the server's limit (16 KiB)" },
  ExpectationFailed: { code: "EXPECTATION_FAILED", description: "An `Expect` header other than `100-continue`" },
  TooManyConnections: { code: "SERVICE_UNAVAILABLE", description: "Open connections at GATEWAY_MAX_CONNECTIONS (answered before routing)", retryAfter: true },
};

export const OPERATIONS: Record<string, Operation> = {
  "GET /api/openapi.json": {
    tag: "reference",
    summary: "This document (OpenAPI 3.1)",
    description: "503 (Retry-After) until every service of the gateway's process has started and its routes are generated: never a partial document.",
    status: 200,
    errors: ["SERVICE_UNAVAILABLE"],
    response: { type: "object", required: ["openapi", "paths"] },
  },
  "GET /api/docs": { tag: "reference", summary: "API reference page (HTML)", status: 200, response: { type: "string" }, contentType: "text/html" },
  "GET /": { tag: "reference", summary: "Redirects to the web console, ./console", status: 302, response: {}, hidden: true },
  "GET /console": { tag: "reference", summary: "The web console (HTML)", status: 200, response: {}, hidden: true },
  "GET /console/{file}": { tag: "reference", summary: "Files of the web console", status: 200, response: {}, hidden: true },
  "GET /api/docs/{file}": { tag: "reference", summary: "Assets of the reference page", status: 200, response: {}, hidden: true },
};
