import type { Migration } from "../../lib/db";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "clients and api keys",
    sql: `
      CREATE TABLE clients (
        id uuid PRIMARY KEY,
        email text NOT NULL,
        name text NOT NULL,
        role text NOT NULL DEFAULT 'client',
        password_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE UNIQUE INDEX clients_email_key ON clients (lower(email));
      -- One row per client: a new key replaces the previous one atomically.
      CREATE TABLE api_keys (
        client_id uuid PRIMARY KEY REFERENCES clients (id) ON DELETE CASCADE,
        key_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 2,
    name: "webhook signing secrets",
    // Kept as issued (the sender must sign with it): PostgreSQL's access control protects it, as it
    // protects the tenants' data. One row per client: a new secret replaces the old one.
    sql: `
      CREATE TABLE webhook_secrets (
        client_id uuid PRIMARY KEY REFERENCES clients (id) ON DELETE CASCADE,
        secret text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
];
