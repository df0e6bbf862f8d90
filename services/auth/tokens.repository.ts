/** SQL for restricted tokens (auth.tokens, migration 4); the only place that knows that table. */
import type { Pool } from "pg";
import { transaction } from "../../lib/db";

export type NewToken = {
  id: string;
  clientId: string;
  tokenHash: string;
  name: string;
  scopes: string[];
  models: string[] | null;
  databases: string[] | null;
  expiresInSeconds: number;
  maxCredits: number | null;
  jobId: string | null;
};

export type TokenRow = {
  id: string;
  client_id: string;
  name: string;
  scopes: string[];
  models: string[] | null;
  databases: string[] | null;
  expires_at: Date;
  max_credits: number | null;
  credits_used: number;
  last_used_at: Date | null;
  job_id: string | null;
  created_at: Date;
};

/** A live token found by its hash, with its account's role. */
export type ResolvedRow = TokenRow & { role: string };

const COLUMNS =
  "t.id, t.client_id, t.name, t.scopes, t.models, t.databases, t.expires_at, t.max_credits, t.credits_used, t.last_used_at, t.job_id, t.created_at";

export type InsertOutcome = { row: TokenRow } | { refused: "noAccount" } | { refused: "quota"; live: number };

export class TokensRepository {
  constructor(private readonly db: Pool) {}

  /**
   * Stores a token. `liveLimit` (null: none, as for a job's token) bounds the account's live tokens
   * made by hand: the account's row is locked first, so two requests at once cannot both pass it.
   */
  async insert(token: NewToken, liveLimit: number | null): Promise<InsertOutcome> {
    return transaction(this.db, async (client) => {
      const owner = await client.query("SELECT id FROM auth.clients WHERE id = $1 FOR UPDATE", [token.clientId]);
      if (!owner.rowCount) return { refused: "noAccount" };
      // Expired tokens are never listed nor accepted: the account's are dropped here, so they do not pile up.
      await client.query("DELETE FROM auth.tokens WHERE client_id = $1 AND expires_at <= now()", [token.clientId]);
      if (liveLimit !== null) {
        const { rows } = await client.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM auth.tokens WHERE client_id = $1 AND job_id IS NULL AND expires_at > now()",
          [token.clientId],
        );
        if (rows[0].n >= liveLimit) return { refused: "quota", live: rows[0].n };
      }
      const { rows } = await client.query<TokenRow>(
        `INSERT INTO auth.tokens AS t (id, client_id, token_hash, name, scopes, models, databases, expires_at, max_credits, job_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8), $9, $10) RETURNING ${COLUMNS}`,
        [
          token.id,
          token.clientId,
          token.tokenHash,
          token.name,
          token.scopes,
          token.models,
          token.databases,
          token.expiresInSeconds,
          token.maxCredits,
          token.jobId,
        ],
      );
      return { row: rows[0] };
    });
  }

  /** The account's live tokens, oldest first. */
  async list(clientId: string): Promise<TokenRow[]> {
    const { rows } = await this.db.query<TokenRow>(
      `SELECT ${COLUMNS} FROM auth.tokens t WHERE t.client_id = $1 AND t.expires_at > now() ORDER BY t.created_at, t.id`,
      [clientId],
    );
    return rows;
  }

  /** Whether the account had this token (another account's id deletes nothing). */
  async delete(clientId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM auth.tokens WHERE id = $1 AND client_id = $2", [id, clientId]);
    return (rowCount ?? 0) > 0;
  }

  /** Deletes a job's tokens; their ids and accounts (none: already gone). */
  async deleteForJob(jobId: string): Promise<{ id: string; client_id: string }[]> {
    const { rows } = await this.db.query<{ id: string; client_id: string }>("DELETE FROM auth.tokens WHERE job_id = $1 RETURNING id, client_id", [jobId]);
    return rows;
  }

  /** The live token with this SHA-256, or undefined (unknown, deleted or expired). */
  async findByHash(tokenHash: string): Promise<ResolvedRow | undefined> {
    const { rows } = await this.db.query<ResolvedRow>(
      `SELECT ${COLUMNS}, c.role FROM auth.tokens t JOIN auth.clients c ON c.id = t.client_id WHERE t.token_hash = $1 AND t.expires_at > now()`,
      [tokenHash],
    );
    return rows[0];
  }

  /** Records when tokens were last used, one statement for a batch (token-usage.ts). */
  async touch(lastUsed: ReadonlyMap<string, Date>): Promise<void> {
    if (!lastUsed.size) return;
    await this.db.query(
      `UPDATE auth.tokens t SET last_used_at = GREATEST(t.last_used_at, u.at)
       FROM unnest($1::uuid[], $2::timestamptz[]) AS u (id, at) WHERE t.id = u.id`,
      [[...lastUsed.keys()], [...lastUsed.values()]],
    );
  }

  /** These tokens' credit limits and use (expired ones too; deleted ones are absent). */
  async credits(ids: readonly string[]): Promise<Array<{ id: string; maxCredits: number | null; creditsUsed: number }>> {
    const { rows } = await this.db.query<{ id: string; maxCredits: number | null; creditsUsed: number }>(
      `SELECT id, max_credits AS "maxCredits", credits_used AS "creditsUsed" FROM auth.tokens WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    return rows;
  }

  /** Adds the credits tokens spent, one statement for a batch (inference reports them every second). */
  async addCredits(spent: ReadonlyArray<{ id: string; credits: number }>): Promise<void> {
    if (!spent.length) return;
    await this.db.query(
      `UPDATE auth.tokens t SET credits_used = t.credits_used + u.credits
       FROM unnest($1::uuid[], $2::float8[]) AS u (id, credits) WHERE t.id = u.id`,
      [spent.map((s) => s.id), spent.map((s) => s.credits)],
    );
  }
}
