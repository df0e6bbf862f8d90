import type { Migration } from "../../lib/db";
import { JOB_COUNTERS_SETUP } from "./store/job-counters";
import { NODE_CARDS_TABLE } from "./loop/card-vetting";
import { JOB_GRANTS_TABLE } from "./store/grants.repository";
import { BATCH_WORK_SCHEMA } from "./store/batch-work.schema";
import { SPEC_FROM_COLUMNS } from "./store/job-row";
import { ARRAY_KEY } from "./store/placement.repository";
import { SCHEDULES_TABLE } from "./store/schedules.repository";
import { USAGE_OUTBOX_PUBLISHED, USAGE_OUTBOX_TABLE } from "./store/usage-outbox";
import { WEBHOOK_DELIVERIES_SETTLED, WEBHOOK_DELIVERIES_TABLE } from "./webhooks/webhooks.repository";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "gpu jobs queue",
    sql: `
      CREATE TABLE jobs (
        id uuid PRIMARY KEY,
        -- FIFO order: a global sequence, so replicas with skewed clocks still agree.
        seq bigserial NOT NULL UNIQUE,
        client_id uuid NOT NULL,
        command text NOT NULL,
        container_image text,
        gpu_type text,              -- as requested; null: any card
        gpu_match text NOT NULL,    -- gpu_type normalised (lower case, single spaces; '' for any): the queue partition
        status text NOT NULL CHECK (status IN ('queued', 'assigned', 'running', 'completed', 'failed', 'cancelled')),
        node_id text,
        gpu_uuid text,
        gpu_name text,
        -- The job occupies its card: from placement until the node confirms it is gone.
        holding boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL,
        assigned_at timestamptz,
        started_at timestamptz,
        completed_at timestamptz,
        exit_code integer,
        output text,
        error_message text,
        CHECK (NOT holding OR gpu_uuid IS NOT NULL),
        CHECK (status NOT IN ('assigned', 'running') OR holding)
      );
      -- A card holds one job at a time, whichever replica placed it.
      CREATE UNIQUE INDEX jobs_one_per_card ON jobs (gpu_uuid) WHERE holding;
      CREATE INDEX jobs_queue ON jobs (seq) WHERE status = 'queued';
      -- Per requested type, oldest first: placement reads the distinct types by skipping through it.
      CREATE INDEX jobs_queue_by_type ON jobs (gpu_match, seq) WHERE status = 'queued';
      CREATE INDEX jobs_assigned ON jobs (assigned_at) WHERE status = 'assigned';
      CREATE INDEX jobs_by_client ON jobs (client_id, seq DESC);
      CREATE INDEX jobs_holding_by_node ON jobs (node_id) WHERE holding;
    `,
  },
  {
    version: 2,
    name: "job output as bytes",
    // output stays readable text; the exact bytes, when they are not plain UTF-8 text (NUL, invalid bytes).
    sql: `ALTER TABLE jobs ADD COLUMN output_base64 text;`,
  },
  {
    version: 3,
    name: "idempotency keys of job submissions",
    // The primary key makes concurrent requests with one key create one job: the first claims the
    // row, the others wait for its commit and read the answer it stored.
    sql: `
      CREATE TABLE idempotency_keys (
        client_id uuid NOT NULL,
        key text NOT NULL,
        request_hash text NOT NULL,  -- sha256 of the canonical validated body
        job_id uuid NOT NULL,
        -- The first answer, written in the transaction that claims the key (never seen null).
        status integer,
        response jsonb,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (client_id, key)
      );
      CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
    `,
  },
  {
    version: 4,
    name: "job controls",
    // timeout_seconds null: a job from before (it runs under the node's JOB_TIMEOUT_S). env: the
    // job's variables, read only to hand the job to its node (never by a query serving the detail,
    // which shows env_names); null when it has none.
    sql: `
      ALTER TABLE jobs ADD COLUMN timeout_seconds integer CHECK (timeout_seconds > 0);
      ALTER TABLE jobs ADD COLUMN env jsonb;
      ALTER TABLE jobs ADD COLUMN env_names text[] NOT NULL DEFAULT '{}';
      -- queueTimeoutSeconds: a job still queued at created_at + it is cancelled (housekeeping reads the index).
      ALTER TABLE jobs ADD COLUMN queue_timeout_seconds integer CHECK (queue_timeout_seconds > 0);
      ALTER TABLE jobs ADD COLUMN queue_deadline timestamptz;
      ALTER TABLE jobs ADD COLUMN status_reason text;
      CREATE INDEX jobs_queue_deadline ON jobs (queue_deadline) WHERE status = 'queued' AND queue_deadline IS NOT NULL;
    `,
  },
  {
    version: 5,
    name: "job retries",
    // attempts: started so far (placement counts one); a job already placed before counts its one.
    // not_before: a retried job is not placed before its backoff ends (placement's queue read
    // filters on it; the partial index lists the jobs waiting for one). job_attempts: the ended
    // attempts of retried jobs (the job's row holds the current or last one).
    sql: `
      ALTER TABLE jobs ADD COLUMN max_retries integer NOT NULL DEFAULT 0 CHECK (max_retries BETWEEN 0 AND 10);
      ALTER TABLE jobs ADD COLUMN attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0);
      ALTER TABLE jobs ADD COLUMN not_before timestamptz;
      -- GPU-seconds of the job's ended attempts: the client used (and pays for) every attempt's time.
      ALTER TABLE jobs ADD COLUMN prior_gpu_seconds double precision NOT NULL DEFAULT 0;
      UPDATE jobs SET attempts = 1 WHERE node_id IS NOT NULL;
      CREATE INDEX jobs_queue_not_before ON jobs (not_before) WHERE status = 'queued' AND not_before IS NOT NULL;
      CREATE TABLE job_attempts (
        job_id uuid NOT NULL,
        attempt integer NOT NULL CHECK (attempt >= 1),
        node_id text,
        started_at timestamptz,
        ended_at timestamptz NOT NULL,
        exit_code integer,
        output text,
        output_base64 text,
        error_message text NOT NULL,
        PRIMARY KEY (job_id, attempt)
      );
    `,
  },
  {
    version: 6,
    name: "fair share",
    // priority: 0 low, 1 normal, 2 high. account_usage: an account's GPU-seconds decayed to `at`
    // (FAIR_SHARE_HALF_LIFE_S), added to when one of its jobs that started ends; decayed on read.
    sql: `
      ALTER TABLE jobs ADD COLUMN priority smallint NOT NULL DEFAULT 1 CHECK (priority BETWEEN 0 AND 2);
      -- Per account and requested type, in the account's order: placement skips through the pairs.
      CREATE INDEX jobs_queue_by_account ON jobs (client_id, gpu_match, priority DESC, seq) WHERE status = 'queued';
      -- Per account in its order: queue positions and the queued-jobs limit count through it.
      CREATE INDEX jobs_queue_by_account_order ON jobs (client_id, priority DESC, seq) WHERE status = 'queued';
      CREATE INDEX jobs_holding_by_client ON jobs (client_id) WHERE holding;
      CREATE TABLE account_usage (
        client_id uuid PRIMARY KEY,
        gpu_seconds double precision NOT NULL,
        at timestamptz NOT NULL
      );
    `,
  },
  {
    version: 7,
    name: "multi-card jobs",
    // gpu_count: cards of one name on one node (gpuCount). gpu_uuids: all the job's cards while it is
    // placed, gpu_uuid staying the first (so jobs_one_per_card still guards one card in the database;
    // the others are guarded by placement's advisory lock and its read of every held card).
    sql: `
      ALTER TABLE jobs ADD COLUMN gpu_count smallint NOT NULL DEFAULT 1 CHECK (gpu_count BETWEEN 1 AND 16);
      ALTER TABLE jobs ADD COLUMN gpu_uuids text[];
      UPDATE jobs SET gpu_uuids = ARRAY[gpu_uuid] WHERE gpu_uuid IS NOT NULL;
      ALTER TABLE jobs ADD CONSTRAINT jobs_cards_placed
        CHECK (gpu_uuid IS NULL OR (gpu_uuids[1] = gpu_uuid AND cardinality(gpu_uuids) = gpu_count));
    `,
  },
  {
    version: 8,
    name: "node drains and lost nodes; admin job listing",
    // nodes: what outlives a replica's in-memory view of a node: an operator's drain (placement
    // reads it under its lock) and when the scheduler last declared it lost. The two indexes serve
    // GET /api/admin/jobs newest first per status, with or without an account.
    sql: `
      CREATE TABLE nodes (
        node_id text PRIMARY KEY,
        draining boolean NOT NULL DEFAULT false,
        drained_at timestamptz,
        drained_by uuid,
        lost_at timestamptz
      );
      CREATE INDEX jobs_by_status ON jobs (status, seq DESC);
      CREATE INDEX jobs_by_client_status ON jobs (client_id, status, seq DESC);
    `,
  },
  {
    version: 9,
    name: "usage outbox",
    // store/usage-outbox.ts USAGE_OUTBOX_TABLE says what it holds.
    sql: USAGE_OUTBOX_TABLE,
  },
  {
    version: 10,
    name: "webhooks",
    // webhooks/webhooks.repository.ts WEBHOOK_DELIVERIES_TABLE says what it holds.
    sql: WEBHOOK_DELIVERIES_TABLE,
  },
  {
    version: 11,
    name: "deep queues and long histories",
    // Counters: queue depth, jobs per status and queued jobs per account without counting rows,
    // exact because a statement trigger writes them in the transaction of every change (a TRUNCATE
    // recounts). jobs_history: ended jobs moved out of the queue table after
    // GPU_JOB_ARCHIVE_AFTER_S, removed after GPU_JOB_RETENTION_DAYS (job-history.ts); it has the
    // same columns as jobs, by name. Autovacuum settings for a queue: vacuum and analyze after a
    // fixed number of changed rows, not a fraction of the table (where autovacuum runs at all;
    // housekeeping vacuums where it does not, see job-history.ts).
    sql: `
      CREATE TABLE job_counts (category text NOT NULL, shard smallint NOT NULL, n bigint NOT NULL, PRIMARY KEY (category, shard))
        WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
      CREATE TABLE queued_counts (client_id uuid NOT NULL, priority smallint NOT NULL, n integer NOT NULL, PRIMARY KEY (client_id, priority))
        WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
      CREATE TABLE jobs_history (LIKE jobs);
      ALTER TABLE jobs_history ADD PRIMARY KEY (id);
      CREATE INDEX jobs_history_by_client ON jobs_history (client_id, seq DESC);
      CREATE INDEX jobs_history_completed ON jobs_history (completed_at);
      -- Ended jobs whose card is free, oldest first: what archiving moves.
      CREATE INDEX jobs_ended ON jobs (completed_at) WHERE status IN ('completed', 'failed', 'cancelled') AND NOT holding;
      ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000,
        autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 5000, autovacuum_vacuum_cost_delay = 0);

${JOB_COUNTERS_SETUP}
    `,
  },
  {
    version: 12,
    name: "admin search of archived jobs",
    // GET /api/admin/jobs reads jobs_history beside jobs (job-search.repository.ts), each filter
    // through an index as on the queue table: newest first, by status, by account and status.
    sql: `
      CREATE INDEX jobs_history_seq ON jobs_history (seq DESC);
      CREATE INDEX jobs_history_by_status ON jobs_history (status, seq DESC);
      CREATE INDEX jobs_history_by_client_status ON jobs_history (client_id, status, seq DESC);
    `,
  },
  { version: 13, name: "webhook deliveries retention", sql: WEBHOOK_DELIVERIES_SETTLED }, // webhooks/webhooks.repository.ts says why
  {
    version: 14,
    name: "gpu-node cards pinned at first registration",
    // loop/card-vetting.ts NODE_CARDS_TABLE says what it holds.
    sql: NODE_CARDS_TABLE,
  },
  {
    version: 15,
    name: "a job is one document",
    // A job's request (lib/job-spec.ts, env aside) is one jsonb document: a new field needs no column,
    // here or in jobs_history. The columns beside it are what queries and indexes read, derived by the
    // insert. Expand/contract (docs/operations.md "Upgrade"): command and container_image stay one
    // release for replicas of the previous version, and a row one inserts gets its document here.
    sql: `
      ${["jobs", "jobs_history"]
        .map(
          (t) => `
      ALTER TABLE ${t} ADD COLUMN spec jsonb;
      UPDATE ${t} SET spec = ${SPEC_FROM_COLUMNS("")};
      ALTER TABLE ${t} ALTER COLUMN spec SET NOT NULL;
      ALTER TABLE ${t} ALTER COLUMN command DROP NOT NULL;`,
        )
        .join("\n")}
      CREATE FUNCTION job_spec_from_columns() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN NEW.spec := ${SPEC_FROM_COLUMNS("NEW.")}; RETURN NEW; END $$;
      CREATE TRIGGER jobs_spec_from_columns BEFORE INSERT ON jobs FOR EACH ROW WHEN (NEW.spec IS NULL) EXECUTE FUNCTION job_spec_from_columns();
    `,
  },
  {
    version: 16,
    name: "credentials granted to job attempts",
    // store/grants.repository.ts JOB_GRANTS_TABLE says what it holds.
    sql: JOB_GRANTS_TABLE,
  },
  {
    version: 17,
    name: "job arrays and dependencies",
    // store/batch-work.schema.ts says what it adds.
    sql: BATCH_WORK_SCHEMA,
  },
  {
    version: 18,
    name: "schedules and preemptible jobs",
    // preemptible: from the document (placement reads it beside the queue); preemptions: times the job was
    // stopped for another; preempting: a stop for another was asked of its node (transitions.ts).
    // The per-account queue index (migration 17's, by array) puts a pair's ordinary jobs before its preemptible ones.
    sql: `
      ${["jobs", "jobs_history"]
        .map(
          (t) => `
      ALTER TABLE ${t} ADD COLUMN preemptible boolean NOT NULL DEFAULT false,
        ADD COLUMN preemptions integer NOT NULL DEFAULT 0,
        ADD COLUMN preempting boolean NOT NULL DEFAULT false,
        ADD COLUMN schedule_id uuid;`,
        )
        .join("\n")}
      DROP INDEX jobs_queue_by_account;
      CREATE INDEX jobs_queue_by_account ON jobs (client_id, gpu_match, (${ARRAY_KEY("")}), preemptible, priority DESC, seq) WHERE status = 'queued';
      ${SCHEDULES_TABLE}
    `,
  },
  {
    version: 19,
    name: "usage kept a while after publishing",
    // store/usage-outbox.ts USAGE_OUTBOX_PUBLISHED says why.
    sql: USAGE_OUTBOX_PUBLISHED,
  },
];
