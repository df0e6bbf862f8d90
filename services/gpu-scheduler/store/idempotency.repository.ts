/** SQL of `gpu_scheduler.idempotency_keys`: claiming a key together with the job it creates. */
import type { Pool } from "pg";
import { transaction } from "../../../lib/db";
import type { PoolClient } from "pg";
import type { CreatedArray, CreatedJob } from "../contract";
import type { Refusal } from "../core/admission";
import type { QueuePositions } from "../api/queue-positions";
import type { JobsRepository } from "./jobs.repository";
import type { NewJob } from "./job-row";

export type KeyedRequest = { clientId: string; key: string; requestHash: string };
/** The answer to a keyed request: its first answer (fresh or replayed), or the key used for another body. */
export type KeyedOutcome<B = CreatedJob> = { kind: "created" | "replayed"; status: number; body: B } | { kind: "reused" };

const CREATED = 201;
/** Claim attempts: another is needed only when the key expired between the claim and the read. */
const CLAIM_ATTEMPTS = 3;

export class IdempotencyRepository {
  constructor(
    private readonly db: Pool,
    private readonly jobs: JobsRepository,
    private readonly positions: QueuePositions,
  ) {}

  /**
   * Creates `job` unless the key is already held (since `expiredBefore`). The key row is inserted
   * first (a concurrent request with the same key waits on its primary key until this commits),
   * then the job and the answer, in one transaction: a key is never seen without its answer.
   * The job is admitted only for a request that would create it (never for a replay); `refused`
   * turns a refusal (the queued-jobs limit) into the error thrown, which leaves no key behind.
   * `mayCreate` (the monthly quotas) runs only for a request that would create the job: what it
   * throws is the answer, and leaves no key behind either.
   */
  async createOnce(
    req: KeyedRequest,
    job: NewJob,
    now: Date,
    expiredBefore: Date,
    limit: number,
    refused: (refusal: Refusal) => Error,
    mayCreate: () => Promise<void> = () => Promise.resolve(),
  ): Promise<KeyedOutcome> {
    return this.claimOnce<CreatedJob>(req, job.id, now, expiredBefore, async (client) => {
      await mayCreate();
      const admitted = await this.jobs.admitAndInsert([job], now, () => limit, client);
      const refusal = admitted.refused.get(job.id);
      if (refusal) throw refused(refusal);
      const position = (await this.positions.ofCreated(admitted.created, client)).get(job.id) ?? 1;
      return { id: job.id, status: "queued", queuePosition: position };
    });
  }

  /**
   * The same for any submission (an array, a job with dependencies): `create` makes it in the
   * key's transaction and returns the answer stored with the key; what it throws leaves no key.
   * `jobId`: the key's job (an array's first).
   */
  async claimOnce<B extends CreatedJob | CreatedArray>(
    req: KeyedRequest,
    jobId: string,
    now: Date,
    expiredBefore: Date,
    create: (client: PoolClient) => Promise<B>,
  ): Promise<KeyedOutcome<B>> {
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const created = await transaction(this.db, async (client) => {
        // An expired key is taken over, as if housekeeping had already removed it.
        const claim = await client.query(
          `INSERT INTO gpu_scheduler.idempotency_keys AS k (client_id, key, request_hash, job_id, created_at) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (client_id, key) DO UPDATE
             SET request_hash = EXCLUDED.request_hash, job_id = EXCLUDED.job_id, created_at = EXCLUDED.created_at, status = NULL, response = NULL
             WHERE k.created_at < $6`,
          [req.clientId, req.key, req.requestHash, jobId, now, expiredBefore],
        );
        if (!claim.rowCount) return undefined;
        const body = await create(client);
        await client.query(`UPDATE gpu_scheduler.idempotency_keys SET status = $3, response = $4 WHERE client_id = $1 AND key = $2`, [
          req.clientId,
          req.key,
          CREATED,
          body,
        ]);
        return body;
      });
      if (created) return { kind: "created", status: CREATED, body: created };
      const { rows } = await this.db.query<{ request_hash: string; status: number; response: B }>(
        `SELECT request_hash, status, response FROM gpu_scheduler.idempotency_keys WHERE client_id = $1 AND key = $2 AND created_at >= $3`,
        [req.clientId, req.key, expiredBefore],
      );
      const held = rows[0];
      if (!held) continue;
      return held.request_hash === req.requestHash ? { kind: "replayed", status: held.status, body: held.response } : { kind: "reused" };
    }
    throw new Error(`Idempotency key of client ${req.clientId} kept expiring while being claimed`);
  }

  /** Removes up to `limit` keys older than `before`; returns how many. */
  async removeExpired(before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.db.query(
      // created_at again outside: a key taken over meanwhile is fresh and stays.
      `DELETE FROM gpu_scheduler.idempotency_keys WHERE created_at < $1 AND (client_id, key) IN
         (SELECT client_id, key FROM gpu_scheduler.idempotency_keys WHERE created_at < $1 LIMIT $2)`,
      [before, limit],
    );
    return rowCount ?? 0;
  }
}
