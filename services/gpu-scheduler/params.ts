/**
 * The actions' shared params (fastest-validator), checked by the broker before a handler runs.
 * What the rules check beyond a field's own shape (a blank command, env names, the gpuType and
 * gpuCount against the cluster, the image's registry) is submission.ts.
 */
import {
  IMAGE_NAME_MAX,
  IMAGE_NAME_PATTERN,
  JOB_COMMAND_MAX,
  MAX_JOB_CARDS,
  MAX_JOB_RETRIES,
  MAX_JOB_SECONDS,
  PRIORITIES,
  WEBHOOK_URL_MAX,
} from "../../lib/job-spec";

/** The body of POST /api/gpu/jobs (CreateJobParams in submission.ts; its TypeBox twin is JobSpec in lib/job-spec.ts). */
export const CREATE_JOB_PARAMS = {
  $$strict: "remove",
  command: { type: "string", min: 1, max: JOB_COMMAND_MAX },
  gpuType: { type: "string", optional: true, trim: true, min: 1, max: 200 },
  containerImage: { type: "string", optional: true, min: 1, max: IMAGE_NAME_MAX, pattern: IMAGE_NAME_PATTERN },
  timeoutSeconds: { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_SECONDS },
  queueTimeoutSeconds: { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_SECONDS },
  maxRetries: { type: "number", optional: true, integer: true, min: 0, max: MAX_JOB_RETRIES },
  // Names and values are checked by jobEnvProblem (one rule for the scheduler and the node).
  env: { type: "object", optional: true },
  priority: { type: "enum", values: [...PRIORITIES], optional: true },
  gpuCount: { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_CARDS },
  webhookUrl: { type: "string", optional: true, max: WEBHOOK_URL_MAX },
};

export const JOB_ID_PARAMS = { id: { type: "string", max: 64 } };
/** `?attempt=N` of a job's log: 1-based, at most its first run and every retry. */
export const ATTEMPT_PARAM = { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_RETRIES + 1, convert: true };
/** The cursor of a followed log's pages (FollowCursor in log-follow.ts). */
export const FOLLOW_CURSOR = {
  $$strict: "remove",
  id: { type: "string", max: 64 },
  fid: { type: "uuid" },
  attempt: { ...ATTEMPT_PARAM, optional: false },
  offset: { type: "number", integer: true, min: 0 },
} as const;
/** The cursor of a `logs` or `artifacts` answer's pages (LogCursor in job-logs.ts). */
export const LOGS_CURSOR = {
  $$strict: "remove",
  id: { type: "string", max: 64 },
  attempt: ATTEMPT_PARAM,
  source: { type: "enum", values: ["node", "result", "artifacts"] },
  offset: { type: "number", integer: true, min: 0 },
};
