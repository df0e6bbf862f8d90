/**
 * The one statement that writes decided patches (core/transitions.ts) to gpu_scheduler.jobs, with
 * everything a change of status carries in the same statement: the ended attempt kept, GPU-seconds
 * to the account's decayed usage and to the usage outbox, a webhook delivery queued at a terminal
 * status, and whether jobs wait on the ended ones. Two sources feed it:
 * - compare-and-set (JobsRepository.compareAndSet): one patch per job, written only where the job is
 *   still as its decision saw it;
 * - a set (JobsRepository.cancelUnfinished): the same patch for every job of an array not finished
 *   yet, the jobs locked and read by the statement itself (no read, decide, write round trips).
 */
import type { JobPatch } from "../core/transitions";
import { decayedUsageSql } from "./placement.repository";
import { usageNameSql } from "./job-row";

export const TERMINAL_SQL = `('completed', 'failed', 'cancelled')`;

/**
 * `ids`: a query of the ids of the jobs it may write (read before the write: a patch that clears the
 * placement clears the card's name); `source`: rows `p` (id uuid, seen_status text, patch jsonb);
 * `match`: the condition on `j` (the job) and `p` under which the patch is written.
 */
export type PatchSource = { ids: string; source: string; match: string };

export function patchStatementSql({ ids, source, match }: PatchSource, halfLifeS: number): string {
  const set = (field: keyof JobPatch, column: string, cast: string) =>
    `${column} = CASE WHEN p.patch ? '${field}' THEN (p.patch->>'${field}')${cast} ELSE j.${column} END`;
  const unplaced = (column: string) => `${column} = CASE WHEN p.patch ? 'nodeId' THEN NULL ELSE j.${column} END`;
  // A job that started and ends here adds its GPU-seconds to its account's decayed usage (fair share),
  // and its attempt's time to the usage outbox (the ledger's source, usage-outbox.ts).
  return `WITH before AS (SELECT id, ${usageNameSql("jobs")} AS gpu_name FROM gpu_scheduler.jobs WHERE id IN (${ids})),
       written AS (UPDATE gpu_scheduler.jobs j SET
         ${set("status", "status", "")}, ${set("holding", "holding", "::boolean")},
         ${set("attempts", "attempts", "::int")}, ${set("notBefore", "not_before", "::timestamptz")},
         ${set("startedAt", "started_at", "::timestamptz")}, ${set("completedAt", "completed_at", "::timestamptz")},
         ${set("exitCode", "exit_code", "::int")}, ${set("output", "output", "")}, ${set("errorMessage", "error_message", "")},
         ${set("outputBase64", "output_base64", "")}, ${set("statusReason", "status_reason", "")},
         ${set("preempting", "preempting", "::boolean")}, ${set("preemptions", "preemptions", "::int")},
         ${unplaced("node_id")}, ${unplaced("gpu_uuid")}, ${unplaced("gpu_uuids")}, ${unplaced("gpu_name")}, ${unplaced("assigned_at")},
         prior_gpu_seconds = j.prior_gpu_seconds + j.gpu_count * COALESCE(GREATEST(0, EXTRACT(EPOCH FROM
           (p.patch->'endedAttempt'->>'endedAt')::timestamptz - (p.patch->'endedAttempt'->>'startedAt')::timestamptz)), 0)
       FROM ${source}
       WHERE ${match}
       RETURNING j.id, j.client_id, j.status, j.started_at, j.attempts, j.webhook_url, j.node_id, p.seen_status, p.patch->'endedAttempt' AS ended, j.gpu_count AS cards,
         COALESCE((p.patch->'endedAttempt'->>'attempt')::int, GREATEST(j.attempts, 1)) AS attempt,
         COALESCE((p.patch->'endedAttempt'->>'startedAt')::timestamptz, j.started_at) AS use_start,
         COALESCE((p.patch->'endedAttempt'->>'endedAt')::timestamptz, j.completed_at, j.started_at) AS use_end,
         -- A job that ends with dependants (of it, or of its array) has them resolved after the commit (loop/dependency-resolver.ts).
         CASE WHEN p.seen_status NOT IN ${TERMINAL_SQL} AND j.status IN ${TERMINAL_SQL} THEN
           EXISTS (SELECT 1 FROM gpu_scheduler.job_dependencies d WHERE d.on_job = j.id)
           OR (j.array_id IS NOT NULL AND EXISTS (SELECT 1 FROM gpu_scheduler.job_dependencies d WHERE d.on_array = j.array_id)) END AS dependants,
         CASE WHEN p.seen_status NOT IN ${TERMINAL_SQL} AND j.status IN ${TERMINAL_SQL} AND j.started_at IS NOT NULL
           THEN j.gpu_count * GREATEST(extract(epoch FROM COALESCE(j.completed_at, j.started_at) - j.started_at), 0)
           -- an attempt ended and the job went back to the queue (retry): its time counts too
           WHEN p.patch ? 'endedAttempt' THEN j.gpu_count * GREATEST(extract(epoch FROM
             (p.patch->'endedAttempt'->>'endedAt')::timestamptz - (p.patch->'endedAttempt'->>'startedAt')::timestamptz), 0) END AS used),
       kept AS (INSERT INTO gpu_scheduler.job_attempts (job_id, attempt, node_id, started_at, ended_at, exit_code, output, output_base64, error_message)
         SELECT w.id, a.attempt, a."nodeId", a."startedAt", a."endedAt", a."exitCode", a.output, a."outputBase64", a."errorMessage"
         FROM written w, jsonb_to_record(w.ended) AS a(attempt int, "nodeId" text, "startedAt" timestamptz, "endedAt" timestamptz, "exitCode" int,
           output text, "outputBase64" text, "errorMessage" text)
         WHERE w.ended IS NOT NULL
         ON CONFLICT (job_id, attempt) DO NOTHING),
       usage AS (
         INSERT INTO gpu_scheduler.account_usage AS u (client_id, gpu_seconds, at)
         -- In account order: two batches in flight upsert their accounts' rows in one order (no deadlock between them).
         SELECT client_id, sum(used), now() FROM written WHERE used IS NOT NULL GROUP BY client_id ORDER BY client_id
         ON CONFLICT (client_id) DO UPDATE SET gpu_seconds = ${decayedUsageSql(halfLifeS)} + EXCLUDED.gpu_seconds, at = now()),
       outbox AS (
         INSERT INTO gpu_scheduler.usage_outbox (job_id, attempt, client_id, started_at, ended_at, cards, gpu_name)
         SELECT w.id, w.attempt, w.client_id, w.use_start, GREATEST(w.use_end, w.use_start), w.cards, b.gpu_name
         FROM written w JOIN before b ON b.id = w.id WHERE w.used IS NOT NULL AND w.use_start IS NOT NULL
         ON CONFLICT (job_id, attempt) DO NOTHING),
       -- A job with a webhook that reaches its terminal status queues its delivery in this same statement.
       hooks AS (
         INSERT INTO gpu_scheduler.webhook_deliveries (id, client_id, job_id, type, url, next_attempt_at)
         SELECT gen_random_uuid(), client_id, id, 'job.' || status, webhook_url, now() FROM written
         WHERE webhook_url IS NOT NULL AND status IN ${TERMINAL_SQL} AND seen_status NOT IN ${TERMINAL_SQL}
         ON CONFLICT (job_id) DO NOTHING)
       SELECT id, client_id, status, started_at, attempts, webhook_url, node_id, seen_status, dependants FROM written`;
}
