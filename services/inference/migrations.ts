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
  // Version 2 is another change's (the Batch API); versions apply in order, gaps allowed.
  {
    version: 3,
    name: "model deployments and their replicas",
    sql: `
      CREATE TABLE deployments (
        id uuid PRIMARY KEY,
        client_id uuid NOT NULL,
        name text NOT NULL,
        -- Every setting with its default resolved (deployments/contract.ts DeploymentSpec); env apart: its values are secrets.
        spec jsonb NOT NULL,
        env jsonb NOT NULL DEFAULT '{}',
        status text NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'starting', 'ready', 'failed')),
        status_reason text,
        -- Replicas in a row that ended without ever becoming ready.
        failures integer NOT NULL DEFAULT 0,
        desired integer NOT NULL DEFAULT 0,
        -- A request is waiting for a replica since (cold start); cleared once one is ready.
        wanted_at timestamptz,
        last_request_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (client_id, name)
      );
      -- The replicas the controller started (GPU jobs of the owner) and what it learnt of each.
      CREATE TABLE deployment_replicas (
        job_id uuid PRIMARY KEY,
        deployment_id uuid NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
        node_id text,
        -- The first id of the replica's own GET /v1/models: the model sent on.
        model_id text,
        ready_at timestamptz,
        ended_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX deployment_replicas_live ON deployment_replicas (deployment_id) WHERE ended_at IS NULL;
    `,
  },
];
