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
  {
    version: 2,
    name: "files and batches (the Batch API)",
    // files: uploads (purpose batch) and the outputs of batches (batch_output), content kept here.
    // batches: one row per batch, its status and counts; batch_lines: one row per input line,
    // claimed with SKIP LOCKED under a lease and finished by a compare-and-set on its attempt, so
    // a result is stored once whichever replica ran it and a dead replica's claims run again.
    sql: `
      CREATE TABLE files (
        id text PRIMARY KEY,
        client_id uuid NOT NULL,
        purpose text NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
        filename text NOT NULL,
        bytes bigint NOT NULL,
        line_count integer NOT NULL,
        endpoint text,
        content bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX files_client_created ON files (client_id, created_at DESC, id DESC);
      CREATE TABLE batches (
        id text PRIMARY KEY,
        client_id uuid NOT NULL,
        endpoint text NOT NULL,
        input_file_id text NOT NULL,
        completion_window text NOT NULL,
        metadata jsonb,
        -- The creating token's model allow-list (null: any model), applied to every line when it runs.
        allowed_models text[],
        status text NOT NULL CHECK (status IN ('validating', 'in_progress', 'finalizing', 'completed', 'failed', 'expired', 'cancelling', 'cancelled')),
        total integer NOT NULL DEFAULT 0,
        completed integer NOT NULL DEFAULT 0,
        failed integer NOT NULL DEFAULT 0,
        errors jsonb,
        output_file_id text,
        error_file_id text,
        lease_until timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        in_progress_at timestamptz,
        finalizing_at timestamptz,
        completed_at timestamptz,
        failed_at timestamptz,
        expired_at timestamptz,
        cancelling_at timestamptz,
        cancelled_at timestamptz,
        webhook_status text CHECK (webhook_status IN ('pending', 'delivered', 'failed')),
        webhook_attempts integer NOT NULL DEFAULT 0,
        webhook_next_at timestamptz
      );
      CREATE INDEX batches_client_created ON batches (client_id, created_at DESC, id DESC);
      CREATE INDEX batches_open ON batches (status) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');
      CREATE INDEX batches_webhooks ON batches (webhook_next_at) WHERE webhook_status = 'pending';
      CREATE TABLE batch_lines (
        batch_id text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
        line integer NOT NULL,
        client_id uuid NOT NULL,
        custom_id text NOT NULL,
        body jsonb NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_at timestamptz NOT NULL DEFAULT now(),
        result jsonb,
        finished_at timestamptz,
        PRIMARY KEY (batch_id, line)
      );
      -- What is due: pending lines, and running ones whose lease (next_at) ran out.
      CREATE INDEX batch_lines_due ON batch_lines (client_id, next_at) WHERE status IN ('pending', 'running');
    `,
  },
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
  {
    version: 4,
    name: "a batch's restricted token (its maxCredits charged for the batch's lines)",
    sql: `ALTER TABLE batches ADD COLUMN token_id uuid;`,
  },
  {
    version: 5,
    name: "a replica being stopped takes no new requests (deployments' scale-down)",
    sql: `ALTER TABLE deployment_replicas ADD COLUMN stopping_at timestamptz;`,
  },
];
