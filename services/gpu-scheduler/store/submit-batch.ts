/**
 * A batch of submissions (POST /api/gpu/jobs without an Idempotency-Key) in one round trip to
 * PostgreSQL: one multi-statement query, one transaction, that takes the accounts' locks (in one
 * order: batches never deadlock), reads their queued jobs per priority (queued_counts), inserts
 * the jobs that fit their account's queued-jobs limit, and reads every waiting account's standing
 * for the queue positions. The statement decides admission as admission.ts `admit` does (the first
 * of a batch win), and `admit` run on the counts it read names the refused ones and their details;
 * each new job's account-mates ahead of it come from the same counts (`aheadInAccount`).
 * A multi-statement query takes no parameters: values are literals escaped by the driver.
 */
import type { Pool } from "pg";
import { admit, aheadInAccount, QueuedByPriority, Refusal } from "../core/admission";
import { normalizeGpuType, requestedGpuType } from "../core/gpu-type";
import type { QueueAccount } from "../core/queue-position";
import { priorityIndex } from "../../../lib/job-spec";
import { envJson, INSERT_SOURCE, insertJobsSql } from "./jobs.repository";
import type { NewJob } from "./job-row";
import { JobReads, toAccounts } from "./job-reads.repository";

export type SubmittedBatch = {
  created: Array<{ id: string; clientId: string; ahead: number }>;
  refused: Map<string, Refusal>;
  /** Every account with queued jobs, after the insert (queue positions). */
  accounts: Array<Omit<QueueAccount, "weight">>;
};

type Results = [
  unknown,
  unknown,
  { rows: Array<{ client_id: string; priority: number; n: number }> },
  { rows: Array<{ id: string; seq: string }> },
  { rows: Array<{ accounts: Parameters<typeof toAccounts>[0] }> },
  unknown,
];

/**
 * Submits `jobs` (in their batch order) at `now` under each account's limit `limitOf`; `reads`
 * gives the SQL of the waiting accounts' standing (JobReads).
 */
export async function submitBatch(
  db: Pool,
  jobs: NewJob[],
  now: Date,
  limitOf: (clientId: string) => number,
  reads: Pick<JobReads, "queueAccountsSql">,
): Promise<SubmittedBatch> {
  const client = await db.connect();
  try {
    const lit = (v: string | null) => (v === null ? "NULL" : client.escapeLiteral(v));
    const clients = [...new Set(jobs.map((j) => j.clientId))].map(lit).join(", ");
    const values = jobs
      .map((j, i) => {
        const type = requestedGpuType(j.spec.gpuType);
        const env = envJson(j);
        return `(${i}, ${lit(j.id)}::uuid, ${lit(j.clientId)}::uuid, ${Math.max(0, Math.floor(limitOf(j.clientId)))}, ${lit(JSON.stringify(j.spec))}::jsonb,
          ${lit(type)}::text, ${lit(normalizeGpuType(type))}::text, ${lit(env)}::jsonb, ${priorityIndex(j.spec.priority)}::smallint)`;
      })
      .join(",\n");
    const results = (await client.query(
      `BEGIN;
       SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtext('ci-platform:gpu-scheduler:queued:' || c) AS h FROM unnest(ARRAY[${clients}]) c) s ORDER BY h;
       SELECT client_id, priority, n FROM gpu_scheduler.queued_counts WHERE client_id IN (${clients}) AND n > 0;
       WITH b(ord, ${INSERT_SOURCE.replace("id, client_id", "id, client_id, lim")}) AS (VALUES ${values}),
         queued AS (SELECT client_id, sum(n)::int AS n FROM gpu_scheduler.queued_counts WHERE client_id IN (${clients}) GROUP BY client_id),
         -- admission.ts: a job fits while its account's queued jobs, those of the batch before it included, stay under the limit.
         ranked AS (SELECT b.*, COALESCE(q.n, 0) + row_number() OVER (PARTITION BY b.client_id ORDER BY b.ord) AS queued_with FROM b LEFT JOIN queued q USING (client_id))
       ${insertJobsSql("(SELECT * FROM ranked WHERE queued_with <= lim ORDER BY ord) u", `${lit(now.toISOString())}::timestamptz`)}
       RETURNING id, seq;
       SELECT (${reads.queueAccountsSql()}) AS accounts;
       COMMIT`,
    )) as unknown as Results;
    const queued = new Map<string, Map<number, number>>();
    for (const r of results[2].rows) queued.set(r.client_id, (queued.get(r.client_id) ?? new Map<number, number>()).set(r.priority, r.n));
    const seqs = new Map(results[3].rows.map((r) => [r.id, Number(r.seq)]));
    // The statement decided; `admit` on the same counts decides alike and gives each refusal its details.
    const { refused: why } = admit(jobs, queued as ReadonlyMap<string, QueuedByPriority>, limitOf);
    const refused = new Map<string, Refusal>();
    for (const j of jobs) if (!seqs.has(j.id)) refused.set(j.id, why.get(j.id) ?? { limit: limitOf(j.clientId), used: limitOf(j.clientId) });
    const created = jobs
      .filter((j) => seqs.has(j.id))
      .map((j) => ({ id: j.id, clientId: j.clientId, priority: priorityIndex(j.spec.priority), seq: seqs.get(j.id)! }));
    const ahead = aheadInAccount(created, queued);
    return {
      created: created.map((j) => ({ id: j.id, clientId: j.clientId, ahead: ahead.get(j.id)! })),
      refused,
      accounts: toAccounts(results[4].rows[0].accounts),
    };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
