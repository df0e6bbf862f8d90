/** @ci-platform/sdk: the typed client of the ci-platform API. */
export { BATCH_ENDED, CiPlatform, TERMINAL, TOKEN_SCOPES } from "./client";
export type {
  ArrayCreated,
  Batch,
  BatchFile,
  BatchRequest,
  ChatCompletion,
  ChatCompletionRequest,
  Database,
  DatabaseRequest,
  Deployment,
  DeploymentChange,
  DeploymentRequest,
  InferenceChunk,
  InferenceRequest,
  Job,
  JobArray,
  JobCreated,
  JobRequest,
  JobStatus,
  PlatformAccess,
  Schedule,
  ScheduleRequest,
  ScheduleUpdate,
  Schemas,
  TokenRequest,
  TokenScope,
  WaitOptions,
} from "./client";
export { buildUrl, DEFAULT_TIMEOUT_MS, request, send } from "./http";
export type { CallOptions, Credentials, Method, PathsWith, RawInit, RequestInit, ResponseOf } from "./http";
export {
  ApiError,
  AuthenticationError,
  BadRequestError,
  CiPlatformError,
  ConflictError,
  ConnectionError,
  errorFor,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TimeoutError,
} from "./errors";
export { backoffMs, RETRY_DEFAULTS, retryAfterMs, shouldRetry } from "./retry";
export type { RetryOptions } from "./retry";
export { jsonEvents, sseMessages, textChunks } from "./streams";
export type { SseMessage } from "./streams";
export type { components, paths } from "./generated/schema";
