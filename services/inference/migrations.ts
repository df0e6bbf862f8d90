import type { Migration } from "../../lib/db";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "inferences (usage accounting)",
    sql: `
      CREATE TABLE inferences (
        id uuid PRIMARY KEY,
        client_id uuid NOT NULL,
        model text NOT NULL,
        provider text,
        prompt_tokens integer NOT NULL DEFAULT 0,
        completion_tokens integer NOT NULL DEFAULT 0,
        tokens_used integer NOT NULL DEFAULT 0,
        duration_ms integer NOT NULL,
        outcome text NOT NULL CHECK (outcome IN ('ok', 'error', 'aborted', 'timeout')),
        error_code text,
        stream boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      -- Usage per account over time.
      CREATE INDEX inferences_client_created ON inferences (client_id, created_at DESC);
    `,
  },
];
