/**
 * The SDK's entry point: every route of the document as a typed call (`api`), and named methods
 * for the everyday ones, plus the streams and `waitForJob` that generation cannot give.
 */
import type { components } from "./generated/schema";
import { CallOptions, Credentials, Method, PathsWith, request, RequestInit, ResponseOf, send } from "./http";
import { jsonEvents, textChunks } from "./streams";

export type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type JobStatus = Schemas["JobStatus"];
/** POST /api/gpu/jobs with `arrayCount`, and GET /api/gpu/arrays/:id. */
export type ArrayCreated = Schemas["ArrayCreated"];
export type JobCreated = Schemas["JobCreated"];
export type JobArray = Schemas["JobArray"];
type Body<P extends PathsWith<M>, M extends Method> = RequestInit<P, M> extends { body?: infer B } ? NonNullable<B> : never;
export type JobRequest = Body<"/api/gpu/jobs", "post">;
export type DatabaseRequest = Body<"/api/databases", "post">;
export type TokenRequest = Body<"/api/auth/tokens", "post">;
/** A cron schedule of a job (POST /api/gpu/schedules). */
export type ScheduleRequest = Body<"/api/gpu/schedules", "post">;
export type ScheduleUpdate = Body<"/api/gpu/schedules/{id}", "patch">;
export type Schedule = Schemas["Schedule"];
export type DeploymentRequest = Body<"/api/deployments", "post">;
export type DeploymentChange = Body<"/api/deployments/{id}", "patch">;
export type Deployment = Schemas["Deployment"];
/** A database's detail: `status` restoring, active or failed (`statusReason`) for a point-in-time restore. */
export type Database = Schemas["Database"];
/** What a restricted token, or a job's own (`platformAccess`), may do; `:write` includes `:read`. */
export type TokenScope = Schemas["TokenInfo"]["scopes"][number];
/** A job's access to the platform (POST /api/gpu/jobs `platformAccess`, echoed in the detail). */
export type PlatformAccess = NonNullable<Job["platformAccess"]>;
export type InferenceRequest = Omit<Body<"/api/models/infer", "post">, "stream">;
/** OpenAI's chat completion request (POST /v1/chat/completions): tools and response_format included. */
export type ChatCompletionRequest = Omit<Body<"/v1/chat/completions", "post">, "stream" | "stream_options">;
export type ChatCompletion = Schemas["OpenAiChatCompletion"];
/** OpenAI's Batch API (POST /v1/batches, /v1/files). */
export type Batch = Schemas["OpenAiBatch"];
export type BatchRequest = Body<"/v1/batches", "post">;
export type BatchFile = Schemas["OpenAiFile"];
/** The statuses a batch ends in. */
export const BATCH_ENDED: ReadonlySet<Batch["status"]> = new Set(["completed", "failed", "expired", "cancelled"]);
/** One event of a streamed inference: deltas, then a last one with `done: true`. */
export type InferenceChunk = { id: string; model: string; delta?: string; response?: string; tokensUsed?: number; durationMs?: number; done?: boolean };

/** Every scope, in the document's order: a Record over TokenScope, so a scope the document adds fails to compile here. */
const SCOPE_SET: Record<TokenScope, true> = {
  "jobs:read": true,
  "jobs:write": true,
  inference: true,
  "databases:read": true,
  "databases:write": true,
  "usage:read": true,
};
export const TOKEN_SCOPES = Object.keys(SCOPE_SET) as readonly TokenScope[];

export const TERMINAL: ReadonlySet<JobStatus> = new Set(["completed", "failed", "cancelled"]);

export type WaitOptions = { signal?: AbortSignal; onUpdate?: (job: Job) => void };

/** `idempotencyKey`: your own key (the same one again answers the first submission); a new UUID by default. */
export type SubmitOptions = { idempotencyKey?: string };
const idempotent = (opts: SubmitOptions): CallOptions => ({ headers: { "Idempotency-Key": opts.idempotencyKey ?? crypto.randomUUID() }, idempotent: true });

export class CiPlatform {
  readonly creds: Credentials;

  /** `token`: a JWT or an API key (`ci_…`); either goes in `Authorization: Bearer`. Timeouts and retries: see Credentials. */
  constructor(opts: Credentials) {
    this.creds = { ...opts };
  }

  /** Any route of the document, typed by it. */
  api<M extends Method, P extends PathsWith<M>>(method: M, path: P, init: RequestInit<P, M> & CallOptions): Promise<ResponseOf<P, M>> {
    return request(this.creds, method, path, init);
  }

  withToken(token: string): CiPlatform {
    return new CiPlatform({ ...this.creds, token });
  }

  // accounts
  register = (body: Body<"/api/auth/register", "post">) => this.api("post", "/api/auth/register", { body });
  login = (body: Body<"/api/auth/login", "post">) => this.api("post", "/api/auth/login", { body });
  me = () => this.api("get", "/api/auth/me", {});
  /** JWT only; replaces the account's previous key. */
  createApiKey = () => this.api("post", "/api/auth/api-keys", {});
  createWebhookSecret = () => this.api("post", "/api/auth/webhook-secret", {});
  /** JWT only: a restricted token (cit_…), shown once. */
  createToken = (body: TokenRequest) => this.api("post", "/api/auth/tokens", { body });
  listTokens = () => this.api("get", "/api/auth/tokens", {});
  deleteToken = (id: string) => this.api("delete", "/api/auth/tokens/{id}", { path: { id } });

  // GPU jobs
  /** One job (the answer of a request without `arrayCount`: an array is `submitArray`). Sent with an `Idempotency-Key`, so a retry never submits twice. */
  submitJob = (body: Omit<JobRequest, "arrayCount" | "arrayParallelism">, opts: SubmitOptions = {}) =>
    this.api("post", "/api/gpu/jobs", { body, ...idempotent(opts) }) as Promise<JobCreated>;
  /** `arrayCount` jobs in one request; each sees CI_ARRAY_INDEX and CI_ARRAY_ID. With an `Idempotency-Key`, as submitJob. */
  submitArray = (body: JobRequest & { arrayCount: number }, opts: SubmitOptions = {}) =>
    this.api("post", "/api/gpu/jobs", { body, ...idempotent(opts) }) as Promise<ArrayCreated>;
  listJobs = () => this.api("get", "/api/gpu/jobs", {});
  getJob = (id: string) => this.api("get", "/api/gpu/jobs/{id}", { path: { id } });
  cancelJob = (id: string) => this.api("post", "/api/gpu/jobs/{id}/cancel", { path: { id } });
  /** An array of jobs (`arrayCount`): its jobs counted by status; cancel stops every unfinished one. */
  getArray = (id: string) => this.api("get", "/api/gpu/arrays/{id}", { path: { id } });
  cancelArray = (id: string) => this.api("post", "/api/gpu/arrays/{id}/cancel", { path: { id } });
  clusterStatus = () => this.api("get", "/api/gpu/status", {});
  /** Each card's utilization and memory per bucket over the last hour (kept by the metrics service; 503 while it is not running). */
  clusterHistory = () => this.api("get", "/api/gpu/status/history", {});

  // schedules of GPU jobs
  createSchedule = (body: ScheduleRequest) => this.api("post", "/api/gpu/schedules", { body });
  listSchedules = () => this.api("get", "/api/gpu/schedules", {});
  getSchedule = (id: string) => this.api("get", "/api/gpu/schedules/{id}", { path: { id } });
  updateSchedule = (id: string, body: ScheduleUpdate) => this.api("patch", "/api/gpu/schedules/{id}", { path: { id }, body });
  deleteSchedule = (id: string) => this.api("delete", "/api/gpu/schedules/{id}", { path: { id } });

  /** The job's output so far (an attempt's with `attempt`). */
  async jobLogs(id: string, attempt?: number): Promise<string> {
    return (await send(this.creds, "get", "/api/gpu/jobs/{id}/logs", { path: { id }, query: { attempt }, accept: "text/plain" })).text();
  }

  /** The job's output as it is printed, ending when the job has; a `break` closes the connection. */
  async *followLogs(id: string, opts: { attempt?: number; signal?: AbortSignal } = {}): AsyncGenerator<string> {
    const query = { follow: true, attempt: opts.attempt };
    yield* textChunks(await send(this.creds, "get", "/api/gpu/jobs/{id}/logs", { path: { id }, query, signal: opts.signal, accept: "text/plain" }));
  }

  /** The job's detail now, then at each status change; ends after a terminal one. */
  async *jobEvents(id: string, opts: { signal?: AbortSignal } = {}): AsyncGenerator<Job> {
    const res = await send(this.creds, "get", "/api/gpu/jobs/{id}/events", { path: { id }, signal: opts.signal, accept: "text/event-stream" });
    for await (const { event, data } of jsonEvents<Job>(res)) if (event === "status") yield data;
  }

  /** Resolves with the job once it is completed, failed or cancelled. */
  async waitForJob(id: string, opts: WaitOptions = {}): Promise<Job> {
    // The stream may end early (a proxy, a restart): read again until the job is terminal.
    for (;;) {
      for await (const job of this.jobEvents(id, opts)) {
        opts.onUpdate?.(job);
        if (TERMINAL.has(job.status)) return job;
      }
      const job = await this.getJob(id);
      if (TERMINAL.has(job.status)) return job;
    }
  }

  /** The job's artifacts, a tar archive, as a web stream. */
  async jobArtifacts(id: string, opts: { signal?: AbortSignal } = {}): Promise<ReadableStream<Uint8Array>> {
    return (await send(this.creds, "get", "/api/gpu/jobs/{id}/artifacts", { path: { id }, signal: opts.signal, accept: "application/x-tar" })).body!;
  }

  // models and inference
  listModels = () => this.api("get", "/api/models", {});
  modelsHealth = () => this.api("get", "/api/models/health", {});
  infer = (body: InferenceRequest) => this.api("post", "/api/models/infer", { body: { ...body, stream: false } });

  /** A streamed inference: deltas as they arrive, the last chunk with `done: true`; a failure mid-stream throws ApiError. */
  async *inferStream(body: InferenceRequest, opts: { signal?: AbortSignal } = {}): AsyncGenerator<InferenceChunk> {
    const res = await send(this.creds, "post", "/api/models/infer", { body: { ...body, stream: true }, signal: opts.signal, accept: "text/event-stream" });
    for await (const { data } of jsonEvents<InferenceChunk>(res)) yield data;
  }

  /** One chat completion, whole (OpenAI's API: an answer's tool calls in `choices[0].message.tool_calls`). */
  chatCompletion = (body: ChatCompletionRequest) => this.api("post", "/v1/chat/completions", { body: { ...body, stream: false } });

  // batches (OpenAI's Batch API)
  /** Uploads a batch input file (JSONL, one request a line): multipart, as OpenAI's clients send it. */
  async uploadBatchFile(content: string | Uint8Array<ArrayBuffer>, filename = "batch.jsonl"): Promise<BatchFile> {
    const form = new FormData();
    form.append("purpose", "batch");
    form.append("file", new Blob([content]), filename);
    const res = await send(this.creds, "post", "/v1/files", { form });
    return (await res.json()) as BatchFile;
  }
  createBatch = (body: BatchRequest) => this.api("post", "/v1/batches", { body });
  listBatches = () => this.api("get", "/v1/batches", {});
  getBatch = (id: string) => this.api("get", "/v1/batches/{id}", { path: { id } });
  cancelBatch = (id: string) => this.api("post", "/v1/batches/{id}/cancel", { path: { id } });
  /** A file's lines (a batch's output or error file). */
  async fileContent(id: string): Promise<string> {
    return (await send(this.creds, "get", "/v1/files/{id}/content", { path: { id }, accept: "application/jsonl" })).text();
  }

  // databases
  createDatabase = (body: DatabaseRequest = {}) => this.api("post", "/api/databases", { body });
  /** A new database with `databaseId`'s data as of `timestamp` (ISO 8601, within its restoreWindow): answered at once, `status: "restoring"`; getDatabase says when it is active or failed. */
  restoreDatabase = (databaseId: string, timestamp: string) => this.createDatabase({ restoreFrom: { databaseId, timestamp } });
  listDatabases = () => this.api("get", "/api/databases", {});
  getDatabase = (id: string) => this.api("get", "/api/databases/{id}", { path: { id } });
  deleteDatabase = (id: string) => this.api("delete", "/api/databases/{id}", { path: { id } });
  rotatePassword = (id: string) => this.api("post", "/api/databases/{id}/rotate-password", { path: { id } });
  createSnapshot = (id: string) => this.api("post", "/api/databases/{id}/snapshots", { path: { id } });
  listSnapshots = () => this.api("get", "/api/snapshots", {});
  getSnapshot = (id: string) => this.api("get", "/api/snapshots/{id}", { path: { id } });
  deleteSnapshot = (id: string) => this.api("delete", "/api/snapshots/{id}", { path: { id } });

  // model deployments (docs/deployments.md)
  createDeployment = (body: DeploymentRequest) => this.api("post", "/api/deployments", { body });
  listDeployments = () => this.api("get", "/api/deployments", {});
  getDeployment = (id: string) => this.api("get", "/api/deployments/{id}", { path: { id } });
  updateDeployment = (id: string, body: DeploymentChange) => this.api("patch", "/api/deployments/{id}", { path: { id }, body });
  deleteDeployment = (id: string) => this.api("delete", "/api/deployments/{id}", { path: { id } });
  /** A deployment's latest requests (outcome, tokens, duration), newest first. */
  deploymentRequests = (id: string) => this.api("get", "/api/deployments/{id}/requests", { path: { id } });
  /** A deployment's replicas (GPU jobs of its owner), newest first. */
  deploymentReplicas = (deploymentId: string) => this.api("get", "/api/gpu/jobs", { query: { deploymentId } });

  // usage
  usage = (query: { from?: string; to?: string } = {}) => this.api("get", "/api/usage", { query });
  quotas = () => this.api("get", "/api/quotas", {});
  webhookDeliveries = () => this.api("get", "/api/webhooks/deliveries", {});
}
