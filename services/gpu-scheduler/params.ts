/**
 * The actions' shared params, TypeBox schemas as the responses are, checked by the broker before a
 * handler runs (lib/params-validator.ts). The body of POST /api/gpu/jobs is the job's own schema
 * (JobSpec, lib/job-spec.ts); what the rules check beyond a field's shape (a blank command, env
 * names, the gpuType and gpuCount against the cluster, the image's registry) is api/submission.ts.
 */
import { Type } from "../../lib/contract";
import { MAX_JOB_ATTEMPTS } from "../../lib/job-spec";
import { UUID_PATTERN } from "../../lib/uuid";

const JobId = Type.String({ maxLength: 64 });
/** `?attempt=N` of a job's log: 1-based, at most its first run, every retry and the runs preemptions ended. */
const Attempt = Type.Integer({ minimum: 1, maximum: MAX_JOB_ATTEMPTS });
const Offset = Type.Integer({ minimum: 0 });

export const JOB_ID_PARAMS = Type.Object({ id: JobId });
/** GET /jobs/:id/logs: which attempt, and whether to follow it. */
export const LOGS_PARAMS = Type.Object({ id: JobId, attempt: Type.Optional(Attempt), follow: Type.Optional(Type.Boolean()) });
/** The cursor of a followed log's pages (FollowCursor in streams/log-follow.ts). */
export const FOLLOW_CURSOR = Type.Object({ id: JobId, fid: Type.String({ pattern: UUID_PATTERN }), attempt: Attempt, offset: Offset });
/** The cursor of a `logs` or `artifacts` answer's pages (LogCursor in streams/job-logs.ts). */
export const LOGS_CURSOR = Type.Object({
  id: JobId,
  attempt: Type.Optional(Attempt),
  source: Type.Union([Type.Literal("node"), Type.Literal("result"), Type.Literal("artifacts")]),
  offset: Offset,
});
/** The cursor of an `events` stream (EventsCursor in streams/job-watch.ts). */
export const EVENTS_CURSOR = Type.Object({ id: JobId, last: Type.Optional(Type.String({ maxLength: 32 })) });
/** Internal: the accounts whose state usage asks for. */
export const ACCOUNTS_PARAMS = Type.Object({ clientIds: Type.Array(Type.String({ pattern: UUID_PATTERN }), { minItems: 1, maxItems: 1000 }) });
