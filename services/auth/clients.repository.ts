/** SQL for the auth schema; the only place that knows its tables. */
import type { Pool } from "pg";
import type { PublicClient } from "./contract";

export type ClientRow = { id: string; email: string; name: string; role: string; password_hash: string };

export const toPublicClient = (row: ClientRow | PublicClient): PublicClient => ({
  id: row.id,
  email: row.email,
  name: row.name,
  role: row.role,
});

const UNIQUE_VIOLATION = "23505";

export class ClientsRepository {
  constructor(private readonly db: Pool) {}

  /** Returns null when the e-mail is already taken. */
  async insert(client: ClientRow): Promise<PublicClient | null> {
    try {
      const { rows } = await this.db.query<PublicClient>(
        `INSERT INTO auth.clients (id, email, name, password_hash, role) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, email, name, role`,
        [client.id, client.email, client.name, client.password_hash, client.role],
      );
      return rows[0];
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) return null;
      throw err;
    }
  }

  async findByEmail(email: string): Promise<ClientRow | undefined> {
    const { rows } = await this.db.query<ClientRow>("SELECT id, email, name, role, password_hash FROM auth.clients WHERE lower(email) = lower($1)", [email]);
    return rows[0];
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
