/** @ci-platform/sdk: the typed client of the ci-platform API. */
export { BATCH_ENDED, CiPlatform, TERMINAL, TOKEN_SCOPES } from "./client";
export type {
  ArrayCreated,
  Batch,
  BatchFile,
  BatchRequest,
  ChatCompletion,
  ChatCompletionRequest,
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
export { ApiError, buildUrl, request, send } from "./http";
export type { Credentials, Method, PathsWith, RequestInit, ResponseOf } from "./http";
export { jsonEvents, sseMessages, textChunks } from "./streams";
export type { SseMessage } from "./streams";
export type { components, paths } from "./generated/schema";
