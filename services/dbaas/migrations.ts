import type { Migration } from "../../lib/db";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "client databases and the instance marker",
    sql: `
      -- One row: the marker this platform writes on every role and database it creates on the
      -- tenant server, so the reconciler never touches another platform's objects.
      CREATE TABLE instance (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        singleton boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton)
      );
      INSERT INTO instance DEFAULT VALUES;

      -- Never the password: it is shown once and only the server keeps its SCRAM verifier.
      CREATE TABLE databases (
        id uuid PRIMARY KEY,
        client_id text NOT NULL,
        database_name text NOT NULL UNIQUE,
        username text NOT NULL UNIQUE,
        status text NOT NULL CHECK (status IN ('provisioning', 'active', 'destroying')),
        storage_bytes bigint,
        measured_at timestamptz,
        max_storage_mb integer NOT NULL CHECK (max_storage_mb > 0),
        read_only boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX databases_client_idx ON databases (client_id, created_at DESC);
      CREATE INDEX databases_status_idx ON databases (status, updated_at);
    `,
  },
];
