/**
 * What the OpenAPI document says about each route beyond what the live registry knows: summary,
 * success status and response schema (the public contract: fields may be added, never renamed,
 * retyped or dropped), and the errors a route can answer besides the ones every route of its kind
 * can (see generator.ts).
 * Keyed by "METHOD /api/path" as the gateway serves it; the drift test fails for a live route
 * missing here and for an entry here that no longer has a route.
 */
import type { ErrorCode } from "../../../lib/errors";
import type { JsonSchema } from "./schema";

export type Operation = {
  tag: string;
  summary: string;
  description?: string;
  status: number;
  /** A `#/components/schemas/X` name or an inline schema. */
  response: string | JsonSchema;
  /** Defaults to application/json. */
  contentType?: string;
  /** Extra content types of the success response (e.g. a stream). */
  alternatives?: Record<string, { schema: JsonSchema; description: string }>;
  errors?: ErrorCode[];
  /** Served but not part of the document (static assets of the docs page). */
  hidden?: true;
};

const ts = { type: "string", format: "date-time" };
const tsOrNull = { type: ["string", "null"], format: "date-time" };
const uuid = { type: "string", format: "uuid" };

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
            oneOf: [
              { type: "null" },
              { type: "array", items: { $ref: "#/components/schemas/FieldError" } },
              { type: "object" },
            ],
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
  Client: {
    type: "object",
    required: ["id", "email", "name", "role"],
    properties: { id: uuid, email: { type: "string", format: "email" }, name: { type: "string" }, role: { type: "string", examples: ["client"] } },
  },
  AuthResult: {
    type: "object",
    required: ["accessToken", "client"],
    properties: {
      accessToken: { type: "string", description: "JWT (HS256), valid for 24 hours" },
      client: { $ref: "#/components/schemas/Client" },
    },
  },
  ApiKeyResult: {
    type: "object",
    required: ["apiKey"],
    properties: { apiKey: { type: "string", pattern: "^ci_[a-z0-9]{32}$", description: "Shown once only" } },
  },
  JobStatus: { type: "string", enum: ["queued", "running", "completed", "failed", "cancelled"] },
  JobCreated: {
    type: "object",
    required: ["id", "status", "queuePosition"],
    properties: {
      id: { type: "string" },
      status: { $ref: "#/components/schemas/JobStatus" },
      queuePosition: { type: "integer", minimum: 1, description: "1 means next to start" },
    },
  },
  Job: {
    type: "object",
    required: ["id", "status", "gpuType", "gpuSecondsUsed", "createdAt", "startedAt", "completedAt", "result", "errorMessage"],
    properties: {
      id: { type: "string" },
      status: { $ref: "#/components/schemas/JobStatus" },
      gpuType: { type: "string", description: 'The requested type (or "any") until a card is assigned, then its name' },
      gpuSecondsUsed: { type: "number", minimum: 0 },
      createdAt: ts,
      startedAt: tsOrNull,
      completedAt: tsOrNull,
      result: {
        oneOf: [
          { type: "null" },
          {
            type: "object",
            required: ["exitCode", "output"],
            properties: {
              exitCode: { type: ["integer", "null"] },
              output: {
                type: "string",
                description:
                  "The true last 64 KiB of stdout+stderr, as readable text (bytes that are not UTF-8, and NUL, show as U+FFFD); headed by a truncation note when the node's log cap cut the output",
              },
              outputBase64: {
                type: "string",
                format: "byte",
                description: "Present only when `output` is not exactly the job's bytes (NUL, invalid UTF-8): those bytes, losslessly",
              },
            },
          },
        ],
      },
      errorMessage: { type: ["string", "null"] },
    },
  },
  JobList: {
    type: "object",
    required: ["jobs"],
    properties: { jobs: { type: "array", maxItems: 50, items: { $ref: "#/components/schemas/Job" } } },
  },
  Gpu: {
    type: "object",
    required: ["name", "available", "utilization", "memoryUsed", "memoryTotal", "temperature"],
    properties: {
      name: { type: "string" },
      available: { type: "boolean" },
      utilization: { type: "number", description: "percent (0-100)" },
      memoryUsed: { type: "number", description: "MiB" },
      memoryTotal: { type: "number", description: "MiB" },
      temperature: { type: "number", description: "°C" },
    },
  },
  ClusterStatus: {
    type: "object",
    required: ["cluster", "queueDepth"],
    properties: {
      cluster: {
        type: "object",
        required: ["totalGpus", "availableGpus", "busyGpus", "gpus"],
        properties: {
          totalGpus: { type: "integer", minimum: 0 },
          availableGpus: { type: "integer", minimum: 0 },
          busyGpus: { type: "integer", minimum: 0 },
          gpus: { type: "array", items: { $ref: "#/components/schemas/Gpu" } },
        },
      },
      queueDepth: { type: "integer", minimum: 0, description: "Queued jobs in the whole cluster" },
    },
  },
  Model: {
    type: "object",
    required: ["name", "provider", "parameterSize", "description"],
    properties: {
      name: { type: "string" },
      provider: { type: "string", pattern: "^[a-z0-9_-]+$" },
      parameterSize: { type: "string", pattern: "^[0-9.]+B$" },
      description: { type: "string" },
    },
  },
  ModelList: {
    type: "object",
    required: ["models"],
    properties: { models: { type: "array", items: { $ref: "#/components/schemas/Model" } } },
  },
  InferenceResult: {
    type: "object",
    required: ["id", "model", "response", "tokensUsed", "durationMs"],
    properties: {
      id: { type: "string" },
      model: { type: "string" },
      response: { type: "string" },
      tokensUsed: { type: "integer", minimum: 0 },
      durationMs: { type: "integer", minimum: 0 },
    },
  },
  ProviderHealth: {
    type: "object",
    description: "One boolean per configured provider, named with its lowercase name",
    additionalProperties: { type: "boolean" },
    examples: [{ ollama: true }],
  },
  DatabaseCreated: {
    type: "object",
    required: ["id", "databaseName", "host", "port", "username", "password", "connectionString"],
    properties: {
      id: uuid,
      databaseName: { type: "string", pattern: "^client_[a-z0-9]{8}_[0-9a-f]{8}$" },
      host: { type: "string" },
      port: { type: "integer" },
      username: { type: "string", pattern: "^user_[0-9a-f]{12}$" },
      password: { type: "string", description: "Shown once only" },
      connectionString: { type: "string", format: "uri", description: "postgresql://username:password@host:port/databaseName" },
    },
  },
  Database: {
    type: "object",
    required: ["id", "databaseName", "host", "port", "username", "storageMb", "maxStorageMb", "createdAt"],
    properties: {
      id: uuid,
      databaseName: { type: "string" },
      host: { type: "string" },
      port: { type: "integer" },
      username: { type: "string" },
      storageMb: { type: "number", description: "MiB, 2 decimals" },
      maxStorageMb: { type: "number" },
      createdAt: ts,
      readOnly: { type: "boolean", description: "Over its quota: read-only until back under" },
    },
  },
  DatabaseList: {
    type: "object",
    required: ["databases"],
    properties: { databases: { type: "array", items: { $ref: "#/components/schemas/Database" } } },
  },
  Message: { type: "object", required: ["message"], properties: { message: { type: "string" } } },
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
  RequestTimeout: { code: "REQUEST_TIMEOUT", description: "Headers (GATEWAY_HEADERS_TIMEOUT_MS) or the whole request (GATEWAY_REQUEST_TIMEOUT_MS) not received in time" },
  ParamsTooLarge: { code: "PAYLOAD_TOO_LARGE", description: "Body over 1 MiB (after decoding Content-Encoding), or parameters over GATEWAY_MAX_PARAMS_BYTES" },
  HeadersTooLarge: { code: "HEADERS_TOO_LARGE", description: "Request headers over the server's limit (16 KiB)" },
  ExpectationFailed: { code: "EXPECTATION_FAILED", description: "An `Expect` header other than `100-continue`" },
  TooManyConnections: { code: "SERVICE_UNAVAILABLE", description: "Open connections at GATEWAY_MAX_CONNECTIONS (answered before routing)", retryAfter: true },
};

const SSE_DESCRIPTION =
  'With "stream": true: server-sent events. Each chunk is `data: {"id","model","delta"}`; the last is ' +
  '`data: {…Inference result, "done": true}`; a provider failure mid-stream ends it with `data: {"error": {…}}`.';

export const OPERATIONS: Record<string, Operation> = {
  "POST /api/auth/register": {
    tag: "auth",
    summary: "Register a client account",
    status: 201,
    response: "AuthResult",
    errors: ["EMAIL_TAKEN", "RATE_LIMITED"],
  },
  "POST /api/auth/login": {
    tag: "auth",
    summary: "Log in (a fresh 24-hour JWT)",
    description: "A wrong e-mail and a wrong password answer the same 401.",
    status: 200,
    response: "AuthResult",
    errors: ["UNAUTHORIZED", "RATE_LIMITED"],
  },
  "GET /api/auth/me": { tag: "auth", summary: "The calling client", status: 200, response: "Client" },
  "POST /api/auth/api-keys": {
    tag: "auth",
    summary: "Create an API key (invalidates the previous one)",
    description: "Requires a JWT: an API key gets 403. The key is shown once only.",
    status: 201,
    response: "ApiKeyResult",
  },
  "POST /api/gpu/jobs": {
    tag: "gpu",
    summary: "Submit a GPU job",
    description: "A gpuType matching no card of the cluster is 400, with the known types in details.",
    status: 201,
    response: "JobCreated",
  },
  "GET /api/gpu/jobs": { tag: "gpu", summary: "The caller's 50 most recent jobs, newest first", status: 200, response: "JobList" },
  "GET /api/gpu/jobs/{id}": { tag: "gpu", summary: "One job", status: 200, response: "Job", errors: ["NOT_FOUND"] },
  "POST /api/gpu/jobs/{id}/cancel": {
    tag: "gpu",
    summary: "Cancel a queued or running job",
    status: 200,
    response: "Job",
    errors: ["NOT_FOUND", "INVALID_STATE"],
  },
  "GET /api/gpu/jobs/{id}/logs": {
    tag: "gpu",
    summary: "The job's whole captured output: the exact bytes it printed, streamed (chunked)",
    status: 200,
    response: { type: "string" },
    contentType: "text/plain",
    errors: ["NOT_FOUND"],
  },
  "GET /api/gpu/status": { tag: "gpu", summary: "Cluster status: GPUs and queue depth", status: 200, response: "ClusterStatus" },
  "GET /api/models": { tag: "models", summary: "Models of every configured provider", status: 200, response: "ModelList" },
  "POST /api/models/infer": {
    tag: "models",
    summary: "Generate text with a model",
    status: 200,
    response: "InferenceResult",
    alternatives: { "text/event-stream": { schema: { type: "string" }, description: SSE_DESCRIPTION } },
    errors: ["MODEL_NOT_FOUND", "PROVIDER_ERROR", "PROVIDER_TIMEOUT"],
  },
  "GET /api/models/health": { tag: "models", summary: "Whether each model provider is reachable", status: 200, response: "ProviderHealth" },
  "POST /api/databases": {
    tag: "databases",
    summary: "Provision a PostgreSQL database",
    description: "The password and connection string are shown in this response only.",
    status: 201,
    response: "DatabaseCreated",
    errors: ["QUOTA_EXCEEDED"],
  },
  "GET /api/databases": { tag: "databases", summary: "The caller's active databases, newest first", status: 200, response: "DatabaseList" },
  "GET /api/databases/{id}": { tag: "databases", summary: "One database", status: 200, response: "Database", errors: ["NOT_FOUND"] },
  "DELETE /api/databases/{id}": {
    tag: "databases",
    summary: "Destroy a database and all its data (irreversible)",
    status: 200,
    response: "Message",
    errors: ["NOT_FOUND"],
  },
  "GET /api/openapi.json": {
    tag: "reference",
    summary: "This document (OpenAPI 3.1)",
    status: 200,
    response: { type: "object", required: ["openapi", "paths"] },
  },
  "GET /api/docs": { tag: "reference", summary: "API reference page (HTML)", status: 200, response: { type: "string" }, contentType: "text/html" },
  "GET /api/docs/{file}": { tag: "reference", summary: "Assets of the reference page", status: 200, response: {}, hidden: true },
};
