/**
 * A submission that creates a group of jobs at once (issue 30): an array (`arrayCount` jobs, one
 * request) and/or a job with dependencies, in the caller's transaction: the account's lock and
 * queued count (the whole group counts against QUOTA_QUEUED_JOBS), the array's row, every job in
 * one multi-row insert (parameters as arrays: one statement however many jobs), and the
 * dependencies once for the group.
 */
import type { PoolClient } from "pg";
import { normalizeGpuType, requestedGpuType } from "../core/gpu-type";
import { type JobDependencyParams, priorityIndex } from "../../../lib/job-spec";
import type { Refusal } from "../core/admission";
import type { DependenciesRepository } from "./dependencies.repository";
import { envJson, INSERT_SOURCE, insertJobsSql } from "./jobs.repository";
import type { NewJob } from "./job-row";

export type JobGroup = {
  clientId: string;
  /** The jobs, in array order (index 0 first). */
  jobs: NewJob[];
  /** The array they form (absent: one job with dependencies). `parallelism` null: uncapped. */
  array?: { id: string; parallelism: number | null };
  dependsOn: readonly JobDependencyParams[];
  /** `waiting` while dependencies do not all hold yet (with the reason), else `queued`. */
  status: "queued" | "waiting";
  statusReason: string | null;
};

/** The account's queued jobs (waiting ones included), under its lock (the lock batches of submit-batch.ts take). */
export async function lockQueuedCount(tx: PoolClient, clientId: string): Promise<number> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext('ci-platform:gpu-scheduler:queued:' || $1::text))`, [clientId]);
  const { rows } = await tx.query<{ n: number }>(`SELECT COALESCE(sum(n), 0)::int AS n FROM gpu_scheduler.queued_counts WHERE client_id = $1`, [clientId]);
  return rows[0].n;
}

/** Whether the group fits the account's queued-jobs limit (`used`: its queued jobs now), else the refusal. */
export const groupRefusal = (size: number, used: number, limit: number): Refusal | null => (used + size > limit ? { limit, used } : null);

/** Inserts the group in `tx` at `now`. */
export async function insertGroup(tx: PoolClient, group: JobGroup, now: Date, deps: Pick<DependenciesRepository, "insert">): Promise<void> {
  const { jobs, array } = group;
  if (array) {
    await tx.query(`INSERT INTO gpu_scheduler.job_arrays (id, client_id, total, parallelism, created_at) VALUES ($1, $2, $3, $4, $5)`, [
      array.id,
      group.clientId,
      jobs.length,
      array.parallelism,
      now,
    ]);
  }
  // Every job of an array has the same document and type: sent once, repeated by the statement.
  const first = jobs[0];
  const type = requestedGpuType(first.spec.gpuType);
  await tx.query(
    insertJobsSql(
      `(SELECT i, id, $2::uuid AS client_id, $3::jsonb AS spec, $4::text AS gpu_type, $5::text AS gpu_match, $6::jsonb AS env, $7::smallint AS priority
        FROM unnest($1::uuid[]) WITH ORDINALITY AS x(id, i) ORDER BY i) AS u(i, ${INSERT_SOURCE})`,
      "$8::timestamptz",
      {
        status: "$9::text",
        columns: { status_reason: "$10::text", array_id: "$11::uuid", array_index: `CASE WHEN $11::uuid IS NULL THEN NULL ELSE u.i - 1 END` },
      },
    ),
    [
      jobs.map((j) => j.id),
      group.clientId,
      JSON.stringify(first.spec),
      type,
      normalizeGpuType(type),
      envJson(first),
      priorityIndex(first.spec.priority),
      now,
      group.status,
      group.statusReason,
      array?.id ?? null,
    ],
  );
  await deps.insert(tx, array?.id ?? first.id, group.dependsOn);
}
