import type { Migration } from "../../lib/db";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "usage ledger, hourly rollups, quota overrides",
    // records: one row per source key (what an owner measured once); a redelivery inserts nothing.
    // hourly: the records split at hour edges and summed per (account, resource, name, hour), so a
    // window is a sum over whole hours plus the records of its two partial hours.
    sql: `
      CREATE TABLE records (
        key text PRIMARY KEY,
        client_id uuid NOT NULL,
        resource text NOT NULL CHECK (resource IN ('gpu', 'inference', 'storage')),
        name text NOT NULL,
        started_at timestamptz NOT NULL,
        ended_at timestamptz NOT NULL CHECK (ended_at >= started_at),
        amount double precision NOT NULL CHECK (amount >= 0),
        recorded_at timestamptz NOT NULL DEFAULT now()
      );
      -- The partial hours at a window's edges: records of one account ending after a time.
      CREATE INDEX records_client_ended ON records (client_id, ended_at);
      CREATE TABLE hourly (
        client_id uuid NOT NULL,
        hour timestamptz NOT NULL,
        resource text NOT NULL,
        name text NOT NULL,
        amount double precision NOT NULL,
        events bigint NOT NULL,
        PRIMARY KEY (client_id, hour, resource, name)
      );
      CREATE TABLE quota_overrides (
        client_id uuid PRIMARY KEY,
        credits double precision CHECK (credits >= 0),
        gpu_seconds double precision CHECK (gpu_seconds >= 0),
        tokens bigint CHECK (tokens >= 0),
        databases integer CHECK (databases >= 0),
        storage_mb double precision CHECK (storage_mb >= 0),
        running_gpus integer CHECK (running_gpus >= 0),
        queued_jobs integer CHECK (queued_jobs >= 0),
        requests_per_minute integer CHECK (requests_per_minute >= 1),
        tokens_per_minute integer CHECK (tokens_per_minute >= 1),
        fair_share_weight double precision CHECK (fair_share_weight > 0),
        updated_at timestamptz NOT NULL DEFAULT now(),
        updated_by text
      );
    `,
  },
  {
    version: 2,
    name: "all-time totals (Prometheus); each account's longest record per resource (window edges)",
    // totals: one row per (resource, name), kept by the statement that stores records: the
    // platform's totals for the metrics service without summing every account's hours.
    // spans: the longest record of each account and resource, so a window's partial hours read the
    // records ending up to that long after them (minutes for most), not up to a week.
    sql: `
      CREATE TABLE totals (
        resource text NOT NULL,
        name text NOT NULL,
        amount double precision NOT NULL,
        events bigint NOT NULL,
        PRIMARY KEY (resource, name)
      );
      INSERT INTO totals (resource, name, amount, events) SELECT resource, name, sum(amount), sum(events) FROM hourly GROUP BY 1, 2;
      CREATE TABLE spans (
        client_id uuid NOT NULL,
        resource text NOT NULL,
        longest interval NOT NULL,
        PRIMARY KEY (client_id, resource)
      );
      INSERT INTO spans (client_id, resource, longest) SELECT client_id, resource, max(ended_at - started_at) FROM records GROUP BY 1, 2;
      CREATE INDEX records_client_resource_ended ON records (client_id, resource, ended_at);
      DROP INDEX records_client_ended;
    `,
  },
  {
    version: 3,
    name: "credit factors (batch inference at BATCH_CREDIT_FACTOR of the price)",
    // A record's amount is what was used (tokens, GPU-seconds); credit_factor the share of the price
    // it is charged at, and billed the hours' sums of amount × factor, so credits follow the factor
    // while usage and quotas count the whole amount.
    sql: `
      ALTER TABLE records ADD COLUMN credit_factor double precision NOT NULL DEFAULT 1 CHECK (credit_factor >= 0 AND credit_factor <= 1);
      ALTER TABLE hourly ADD COLUMN billed double precision;
      UPDATE hourly SET billed = amount;
      ALTER TABLE hourly ALTER COLUMN billed SET NOT NULL;
    `,
  },
];
