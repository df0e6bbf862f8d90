/**
 * gpu_scheduler.job_grants: which job attempts were handed platform credentials (a `cit_` token,
 * database roles) that are not revoked yet. loop/platform-grants.ts writes a row before it makes
 * them and deletes it once they are revoked; the row never holds a secret.
 */
import type { Pool, PoolClient } from "pg";
import { transaction } from "../../../lib/db";

/**
 * Migration 16's table (applied text: it must not change). One row per attempt of a job with
 * platformAccess (loop/platform-grants.ts), written before its token and database roles are made,
 * deleted once they are revoked: housekeeping revokes every row whose attempt is no longer live, on
 * whichever replica, after any restart. Never the secrets.
 */
export const JOB_GRANTS_TABLE = `
      CREATE TABLE job_grants (
        job_id uuid NOT NULL,
        attempt integer NOT NULL,
        -- It has database roles (dbaas is asked to drop them).
        databases boolean NOT NULL,
        -- The token and roles are made (or failed): until then only a stale row is revoked.
        settled boolean NOT NULL DEFAULT false,
        -- A sweep is revoking it now: a new attempt's grant waits until it is done.
        sweeping_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (job_id, attempt)
      );
    `;

/** A sweep that started this long ago and left its row died: another may take it. */
const SWEEP_LEASE_S = 30;
/** A grant still being made this long after its row was written belongs to a dispatch that died. */
const UNSETTLED_S = 120;

export type GrantRow = { job_id: string; attempt: number; databases: boolean };

export class GrantsRepository {
  constructor(private readonly db: Pool) {}

  /**
   * Records the attempt's grant, in a transaction that first hands `revokeEarlier` the job's
   * rows of earlier attempts (revoked there, then deleted). Throws when a sweep is revoking one of
   * them now: its revocation could land after the new grant.
   */
  async begin(jobId: string, attempt: number, databases: boolean, revokeEarlier: (earlier: GrantRow[]) => Promise<void>): Promise<void> {
    await transaction(this.db, async (client: PoolClient) => {
      const { rows } = await client.query<GrantRow & { sweeping: boolean }>(
        `SELECT job_id, attempt, databases, sweeping_at > now() - make_interval(secs => $2) AS sweeping FROM gpu_scheduler.job_grants WHERE job_id = $1 FOR UPDATE`,
        [jobId, SWEEP_LEASE_S],
      );
      if (rows.some((r) => r.sweeping)) throw new Error("the credentials of an earlier attempt are being revoked");
      if (rows.length) {
        await revokeEarlier(rows);
        await client.query("DELETE FROM gpu_scheduler.job_grants WHERE job_id = $1", [jobId]);
      }
      await client.query("INSERT INTO gpu_scheduler.job_grants (job_id, attempt, databases) VALUES ($1, $2, $3)", [jobId, attempt, databases]);
    });
  }

  /** The grant is made (or failed half-way): from now on a sweep revokes it as soon as its attempt ends. */
  async settle(jobId: string, attempt: number): Promise<void> {
    await this.db.query("UPDATE gpu_scheduler.job_grants SET settled = true WHERE job_id = $1 AND attempt = $2", [jobId, attempt]);
  }

  /**
   * Claims up to `limit` grants whose job no longer runs (ended, back in the queue, moved to
   * history or gone): a job running again is the next grant's to clean up (begin). Rows being made
   * are left alone until they settle or go stale; rows another replica sweeps, until its lease ends.
   */
  async claimEnded(limit: number): Promise<GrantRow[]> {
    const { rows } = await this.db.query<GrantRow>(
      `UPDATE gpu_scheduler.job_grants SET sweeping_at = now()
        WHERE (job_id, attempt) IN (
          SELECT g.job_id, g.attempt FROM gpu_scheduler.job_grants g
           WHERE (g.settled OR g.created_at < now() - make_interval(secs => $3))
             AND (g.sweeping_at IS NULL OR g.sweeping_at < now() - make_interval(secs => $2))
             AND NOT EXISTS (SELECT 1 FROM gpu_scheduler.jobs j WHERE j.id = g.job_id AND j.status IN ('assigned', 'running'))
           LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING job_id, attempt, databases`,
      [limit, SWEEP_LEASE_S, UNSETTLED_S],
    );
    return rows;
  }

  /** A revocation that failed: the next sweep, or a new attempt's grant, may take the row at once. */
  async release(grant: GrantRow): Promise<void> {
    await this.db.query("UPDATE gpu_scheduler.job_grants SET sweeping_at = NULL WHERE job_id = $1 AND attempt = $2", [grant.job_id, grant.attempt]);
  }

  async remove(grant: GrantRow): Promise<void> {
    await this.db.query("DELETE FROM gpu_scheduler.job_grants WHERE job_id = $1 AND attempt = $2", [grant.job_id, grant.attempt]);
  }
}
