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
  {
    version: 3,
    name: "one account per normalised e-mail",
    // The form of email.ts (canonicalEmail), in SQL. Look-alikes registered before share a form: the
    // account already in that form, else the oldest, keeps it; the others keep NULL and log in by their
    // exact e-mail only, through clients_email_key (the service logs how many at start). normalize() and
    // chr() beyond ASCII exist only in a UTF8 database: elsewhere (initdb's default under the C locale is
    // SQL_ASCII) existing rows get the trimmed, lower-cased form, and new ones email.ts's.
    sql: `
      ALTER TABLE clients ADD COLUMN email_normalized text;
      DO $migration$
      DECLARE
        form text := CASE WHEN current_setting('server_encoding') = 'UTF8'
          THEN $f$rtrim(translate(normalize(lower(normalize(btrim(email), NFKC)), NFKC), chr(12290) || chr(65377), '..'), '.')$f$
          ELSE $f$rtrim(lower(btrim(email)), '.')$f$ END;
      BEGIN
        EXECUTE format($q$
          WITH normalised AS (SELECT id, email, created_at, %s AS form FROM clients),
          ranked AS (SELECT id, form, row_number() OVER (PARTITION BY form ORDER BY email = form DESC, created_at, id) AS rank FROM normalised)
          UPDATE clients c SET email_normalized = r.form FROM ranked r WHERE r.id = c.id AND r.rank = 1
        $q$, form);
      END
      $migration$;
      CREATE UNIQUE INDEX clients_email_normalized_key ON clients (email_normalized);
    `,
  },
  {
    version: 4,
    name: "restricted tokens",
    // Stored as SHA-256 only. models/databases NULL: any. job_id set: issued to a job (not counted in
    // the account's live tokens). credits_used and last_used_at are written in batches (token-usage.ts).
    sql: `
      CREATE TABLE tokens (
        id uuid PRIMARY KEY,
        client_id uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
        token_hash text NOT NULL UNIQUE,
        name text NOT NULL,
        scopes text[] NOT NULL,
        models text[],
        databases text[],
        expires_at timestamptz NOT NULL,
        max_credits double precision,
        credits_used double precision NOT NULL DEFAULT 0,
        last_used_at timestamptz,
        job_id uuid,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX tokens_client_idx ON tokens (client_id, created_at, id);
      CREATE INDEX tokens_job_idx ON tokens (job_id) WHERE job_id IS NOT NULL;
    `,
  },
];
