/** A job as gpu_scheduler.jobs (and jobs_history) stores it, and the rows its repositories read. */
import type { StoredJob } from "../../../lib/job-spec";
import { PREEMPTIBLE_PREFIX } from "../../../lib/usage-protocol";
import type { JobState, StoredStatus } from "../core/transitions";

export type JobRow = {
  id: string;
  client_id: string;
  /** What the job asked for, as stored (lib/job-spec.ts). */
  spec: StoredJob;
  /** The type it asked for as placement reads it (null: any card): gpu-type.ts. */
  gpu_type: string | null;
  status: StoredStatus;
  node_id: string | null;
  gpu_uuid: string | null;
  gpu_name: string | null;
  holding: boolean;
  created_at: Date;
  assigned_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  exit_code: number | null;
  output: string | null;
  output_base64: string | null;
  error_message: string | null;
  timeout_seconds: number | null;
  /** The names of the job's variables, sorted (their values are only read to dispatch the job). */
  env_names: string[];
  queue_timeout_seconds: number | null;
  status_reason: string | null;
  max_retries: number;
  /** Attempts started so far (placement counts one). */
  attempts: number;
  /** GPU-seconds of the ended attempts of a retried job. */
  prior_gpu_seconds: number;
  /** 0 low, 1 normal, 2 high. */
  priority: number;
  /** Cards the job takes (gpuCount). */
  gpu_count: number;
  /** All its cards while placed (the first is gpu_uuid). */
  gpu_uuids: string[] | null;
  /** POSTed a signed event at the job's terminal status (webhook_deliveries). */
  webhook_url: string | null;
  /** The schedule whose tick created it (issue 30). */
  schedule_id: string | null;
  /** Times it was stopped for a waiting job and queued again (preemptible jobs). */
  preemptions: number;
  /** Its node was asked to stop it for a waiting job (read by decisions only: STATE_COLUMNS). */
  preempting?: boolean;
  /** Its array and index there (migration 17); absent in rows of older readers. */
  array_id?: string | null;
  array_index?: number | null;
};

/** SQL: the name a job's GPU time is reported under (`t`: the jobs table's alias): its card's, prefixed for a preemptible job (lib/usage-protocol.ts). */
export const usageNameSql = (t: string) => `CASE WHEN ${t}.preemptible THEN '${PREEMPTIBLE_PREFIX}' ELSE '' END || COALESCE(${t}.gpu_name, 'unknown')`;

/** What the usage service asks of an account now (services/usage/summary.ts AccountNow). */
export type AccountState = { heldGpus: number; queuedJobs: number; running: Array<{ startedAt: string; cards: number; gpuName: string }> };

/** An ended attempt of a retried job (job_attempts). */
export type AttemptRow = { attempt: number; node_id: string | null; exit_code: number | null; output: string | null; output_base64: string | null };

/** A job to insert: its document (lib/job-spec.ts) and environment; the query columns are derived from it here. */
export type NewJob = {
  id: string;
  clientId: string;
  spec: StoredJob;
  env?: Record<string, string>;
};

export const COLUMNS = `id, client_id, spec, gpu_type, status, node_id, gpu_uuid, gpu_name, holding,
  created_at, assigned_at, started_at, completed_at, exit_code, output, output_base64, error_message, timeout_seconds, env_names,
  queue_timeout_seconds, status_reason, max_retries, attempts, prior_gpu_seconds, priority, gpu_count, gpu_uuids, webhook_url, schedule_id, preemptions,
  array_id, array_index`;
/** What a decision reads: `output` only as a presence mark (see `states`). */
export const STATE_COLUMNS = `id, status, node_id, gpu_uuid, holding, assigned_at, started_at, completed_at, exit_code, error_message, attempts, max_retries,
  preemptions, preempting, CASE WHEN output IS NULL THEN NULL ELSE '' END AS output`;

export const toState = (r: JobRow): JobState => ({
  status: r.status,
  nodeId: r.node_id,
  gpuUuid: r.gpu_uuid,
  holding: r.holding,
  assignedAt: r.assigned_at,
  startedAt: r.started_at,
  completedAt: r.completed_at,
  exitCode: r.exit_code,
  output: r.output,
  errorMessage: r.error_message,
  attempts: r.attempts,
  maxRetries: r.max_retries,
  preemptions: r.preemptions,
  preempting: r.preempting,
});

/** A job's document (lib/job-spec.ts) from the columns that held it before migration 15 (`r`: a row prefix, e.g. "NEW."). */
export const SPEC_FROM_COLUMNS = (r: string) => `jsonb_strip_nulls(jsonb_build_object(
        'command', ${r}command, 'gpuType', ${r}gpu_type, 'containerImage', ${r}container_image, 'timeoutSeconds', ${r}timeout_seconds,
        'queueTimeoutSeconds', ${r}queue_timeout_seconds, 'maxRetries', ${r}max_retries, 'priority', (ARRAY['low', 'normal', 'high'])[${r}priority + 1],
        'gpuCount', ${r}gpu_count, 'webhookUrl', ${r}webhook_url))`;
