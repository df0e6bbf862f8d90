/**
 * The actions' shared params (fastest-validator), checked by the broker before a handler runs.
 * The body of POST /api/gpu/jobs is the job's own schema (JobSpec, lib/job-spec.ts); what the
 * rules check beyond a field's shape (a blank command, env names, the gpuType and gpuCount
 * against the cluster, the image's registry) is submission.ts.
 */
import { MAX_JOB_RETRIES } from "../../lib/job-spec";

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
