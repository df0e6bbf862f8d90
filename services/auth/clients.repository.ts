/** SQL for the auth schema; the only place that knows its tables. */
import type { Pool } from "pg";
import type { PublicClient } from "./contract";

export type ClientRow = { id: string; email: string; name: string; role: string; password_hash: string };
/** A stored account for login; `email_normalized` is null for a look-alike older than migration 3 that lost its form to another account. */
export type LoginRow = ClientRow & { email_normalized: string | null };

export const toPublicClient = (row: ClientRow | PublicClient): PublicClient => ({
  id: row.id,
  email: row.email,
  name: row.name,
  role: row.role,
});

const UNIQUE_VIOLATION = "23505";

export class ClientsRepository {
  constructor(private readonly db: Pool) {}

  /** Stores `client.email` as given, which must be its normalised form (email.ts); null when that form is already taken. */
  async insert(client: ClientRow): Promise<PublicClient | null> {
    try {
      const { rows } = await this.db.query<PublicClient>(
        `INSERT INTO auth.clients (id, email, email_normalized, name, password_hash, role) VALUES ($1, $2, $2, $3, $4, $5)
         RETURNING id, email, name, role`,
        [client.id, client.email, client.name, client.password_hash, client.role],
      );
      return rows[0];
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) return null;
      throw err;
    }
  }

  /**
   * The account of a normalised e-mail; `exact` (as typed, trimmed) also finds a look-alike that
   * migration 3 left without a form, and wins: its owner typed it character for character.
   */
  async findForLogin(normalized: string, exact: string): Promise<LoginRow | undefined> {
    const { rows } = await this.db.query<LoginRow>(
      `SELECT id, email, email_normalized, name, role, password_hash FROM auth.clients
       WHERE email_normalized = $1 OR (email_normalized IS NULL AND lower(email) = lower($2))
       ORDER BY email_normalized IS NULL DESC LIMIT 1`,
      [normalized, exact],
    );
    return rows[0];
  }

  /** How many accounts migration 3 left without a normalised e-mail (look-alikes of an older account). */
  async countWithoutNormalizedEmail(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>("SELECT count(*)::int AS n FROM auth.clients WHERE email_normalized IS NULL");
    return rows[0].n;
  }

  async findById(id: string): Promise<PublicClient | undefined> {
    const { rows } = await this.db.query<PublicClient>("SELECT id, email, name, role FROM auth.clients WHERE id = $1", [id]);
    return rows[0];
  }

  /** Accounts in id order: the given `ids`, or a page of at most `limit` after `after`. */
  async list(opts: { ids?: string[]; after?: string; limit?: number }): Promise<PublicClient[]> {
    const { rows } = opts.ids
      ? await this.db.query<PublicClient>("SELECT id, email, name, role FROM auth.clients WHERE id = ANY($1::uuid[]) ORDER BY id", [opts.ids])
      : await this.db.query<PublicClient>("SELECT id, email, name, role FROM auth.clients WHERE $1::uuid IS NULL OR id > $1 ORDER BY id LIMIT $2", [
          opts.after ?? null,
          opts.limit ?? 100,
        ]);
    return rows;
  }

  /** Sets an account's role (ADMIN_EMAILS is applied at login). */
  async setRole(id: string, role: string): Promise<void> {
    await this.db.query("UPDATE auth.clients SET role = $2 WHERE id = $1 AND role IS DISTINCT FROM $2", [id, role]);
  }

  /** Stores the client's only key, replacing any previous one in the same statement. */
  async setApiKey(clientId: string, keyHash: string): Promise<void> {
    await this.db.query(
      `INSERT INTO auth.api_keys (client_id, key_hash) VALUES ($1, $2)
       ON CONFLICT (client_id) DO UPDATE SET key_hash = EXCLUDED.key_hash, created_at = now()`,
      [clientId, keyHash],
    );
  }

  /** Replaces the account's webhook signing secret. */
  async setWebhookSecret(clientId: string, secret: string): Promise<void> {
    await this.db.query(
      `INSERT INTO auth.webhook_secrets (client_id, secret) VALUES ($1, $2)
       ON CONFLICT (client_id) DO UPDATE SET secret = EXCLUDED.secret, created_at = now()`,
      [clientId, secret],
    );
  }

  async webhookSecret(clientId: string): Promise<string | null> {
    const { rows } = await this.db.query<{ secret: string }>(`SELECT secret FROM auth.webhook_secrets WHERE client_id = $1`, [clientId]);
    return rows[0]?.secret ?? null;
  }

  async findByApiKeyHash(keyHash: string): Promise<{ id: string; role: string } | undefined> {
    const { rows } = await this.db.query<{ id: string; role: string }>(
      `SELECT c.id, c.role FROM auth.api_keys k JOIN auth.clients c ON c.id = k.client_id WHERE k.key_hash = $1`,
      [keyHash],
    );
    return rows[0];
  }
}
