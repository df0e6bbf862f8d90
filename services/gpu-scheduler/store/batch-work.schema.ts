/**
 * Migration 17 (issue 30): job arrays and dependencies. Applied text: it must not change.
 *
 * - `jobs.array_id`, `array_index`: a job of an array (jobs_history alike); `job_arrays` holds the
 *   array (its size, `parallelism`: null when it is the size) and how its jobs ended so far,
 *   counted by a statement trigger in the transaction of each change (a dependency on an array
 *   reads one row, not its 10,000 jobs).
 * - Stored status `waiting` (transitions.ts): a job whose dependencies do not all hold yet; it is
 *   never in the placement snapshot (which reads `queued`), and counts as queued in queued_counts.
 * - `job_dependencies`: one row per `dependsOn` entry (`ord`: its place there), found from either
 *   side by index. `dependant` is the job's id, or for an array submitted with `dependsOn` the
 *   array's id (once, not once per job: its jobs wait and are released or cancelled together).
 */
import { QUEUED_COUNTS_WITH_WAITING } from "./job-counters";
import { ARRAY_KEY } from "./placement.repository";

const TERMINAL = `('completed', 'failed', 'cancelled')`;

export const BATCH_WORK_SCHEMA = `
      ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
      ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
        CHECK (status IN ('waiting', 'queued', 'assigned', 'running', 'completed', 'failed', 'cancelled'));
      ALTER TABLE jobs ADD COLUMN array_id uuid, ADD COLUMN array_index integer;
      ALTER TABLE jobs_history ADD COLUMN array_id uuid, ADD COLUMN array_index integer;
      -- The placement snapshot's queue by (account, type, array): an array at its arrayParallelism is skipped whole, not read job by job.
      DROP INDEX jobs_queue_by_account;
      CREATE INDEX jobs_queue_by_account ON jobs (client_id, gpu_match, (${ARRAY_KEY("")}), priority DESC, seq) WHERE status = 'queued';
      CREATE INDEX jobs_by_array ON jobs (array_id, array_index) WHERE array_id IS NOT NULL;
      CREATE INDEX jobs_history_by_array ON jobs_history (array_id, array_index) WHERE array_id IS NOT NULL;
      -- The jobs of an array holding cards (arrayParallelism), read by each placement pass.
      CREATE INDEX jobs_array_holding ON jobs (array_id) WHERE holding AND array_id IS NOT NULL;
      -- Waiting jobs in age order: the housekeeping sweep of dependencies.
      CREATE INDEX jobs_waiting ON jobs (seq) WHERE status = 'waiting';
      CREATE TABLE job_arrays (
        id uuid PRIMARY KEY,
        client_id uuid NOT NULL,
        total integer NOT NULL CHECK (total BETWEEN 1 AND 10000),
        parallelism integer CHECK (parallelism BETWEEN 1 AND total),
        created_at timestamptz NOT NULL,
        completed integer NOT NULL DEFAULT 0,
        failed integer NOT NULL DEFAULT 0,
        cancelled integer NOT NULL DEFAULT 0
      );
      CREATE TABLE job_dependencies (
        dependant uuid NOT NULL,
        ord smallint NOT NULL,
        on_job uuid,
        on_array uuid,
        condition text NOT NULL CHECK (condition IN ('succeeded', 'failed', 'finished')),
        CHECK ((on_job IS NULL) <> (on_array IS NULL)),
        PRIMARY KEY (dependant, ord)
      );
      CREATE INDEX job_dependencies_on_job ON job_dependencies (on_job) WHERE on_job IS NOT NULL;
      CREATE INDEX job_dependencies_on_array ON job_dependencies (on_array) WHERE on_array IS NOT NULL;
      CREATE FUNCTION count_array_outcomes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE gpu_scheduler.job_arrays a
        SET completed = a.completed + d.completed, failed = a.failed + d.failed, cancelled = a.cancelled + d.cancelled
        FROM (SELECT n.array_id, count(*) FILTER (WHERE n.status = 'completed') AS completed,
                count(*) FILTER (WHERE n.status = 'failed') AS failed, count(*) FILTER (WHERE n.status = 'cancelled') AS cancelled
              FROM new_rows n
              WHERE n.array_id IS NOT NULL AND n.status IN ${TERMINAL}
                AND EXISTS (SELECT 1 FROM old_rows o WHERE o.id = n.id AND o.status NOT IN ${TERMINAL})
              GROUP BY n.array_id) d
        WHERE a.id = d.array_id;
        RETURN NULL;
      END $$;
      CREATE TRIGGER jobs_count_array_outcomes AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION count_array_outcomes();
${QUEUED_COUNTS_WITH_WAITING}
    `;
