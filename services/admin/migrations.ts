import type { Migration } from "../../lib/db";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "audit log of admin actions",
    // admin_id is text, not uuid: the entry is written even when the caller could not be read.
    sql: `
      CREATE TABLE audit_log (
        id bigserial PRIMARY KEY,
        at timestamptz NOT NULL DEFAULT now(),
        admin_id text NOT NULL,
        action text NOT NULL,
        target jsonb NOT NULL,
        outcome text NOT NULL
      );
      CREATE INDEX audit_log_by_admin ON audit_log (admin_id, at DESC);
    `,
  },
];
