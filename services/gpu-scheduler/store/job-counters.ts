/**
 * The job counters (job_counts: jobs per category, queued_counts: queued jobs per account and
 * priority), exact without counting rows: statement triggers write them in the transaction of
 * every change to jobs and jobs_history (migration 11 creates them from here), and the readers
 * ask them by the same categories.
 */
import type { PublicStatus } from "../core/transitions";
import { rangesShowing, StatusRange } from "../core/public-status";

/**
 * A job's counted category: a job its node has but has not started yet counts as `assigned`.
 * History: migration 11's applied text, which must not change (transitions.ts PUBLIC_STATUS_TABLE
 * is the rule's home now); `categoryOf` is the same rule for the counters' readers.
 */
const CATEGORY = (t: string) => `CASE WHEN ${t}.status = 'running' AND ${t}.started_at IS NULL THEN 'assigned' ELSE ${t}.status END`;
const categoryOf = (r: StatusRange) => (r.started === false ? "assigned" : r.stored);
/** SQL: the counted categories (job_counts.category) of the jobs a client sees as `status`, e.g. `('queued', 'assigned')`. */
export const categoriesShowingSql = (status: PublicStatus) => `(${[...new Set(rangesShowing(status).map(categoryOf))].map((c) => `'${c}'`).join(", ")})`;

/**
 * The counter updates of one statement's changed rows (`src`: signed rows of the transition
 * tables). Rows are locked in key order, so two transactions never wait on each other crosswise;
 * job_counts takes one shard per backend, so concurrent writers seldom wait at all.
 */
const countDeltas = (src: string, queued = "= 'queued'") => `
    INSERT INTO gpu_scheduler.queued_counts AS c (client_id, priority, n)
      SELECT r.client_id, r.priority, sum(r.k) FROM (${src}) r WHERE r.status ${queued}
      GROUP BY 1, 2 HAVING sum(r.k) <> 0 ORDER BY 1, 2
      ON CONFLICT (client_id, priority) DO UPDATE SET n = c.n + EXCLUDED.n;
    INSERT INTO gpu_scheduler.job_counts AS c (category, shard, n)
      SELECT ${CATEGORY("r")}, pg_backend_pid() % 16, sum(r.k) FROM (${src}) r
      GROUP BY 1 HAVING sum(r.k) <> 0 ORDER BY 1
      ON CONFLICT (category, shard) DO UPDATE SET n = c.n + EXCLUDED.n;`;
/** The counters from the rows themselves (when created, and after a TRUNCATE). */
const recount = (queued = "= 'queued'") => `
    DELETE FROM gpu_scheduler.queued_counts;
    DELETE FROM gpu_scheduler.job_counts;
    INSERT INTO gpu_scheduler.queued_counts SELECT client_id, priority, count(*) FROM gpu_scheduler.jobs WHERE status ${queued} GROUP BY 1, 2;
    INSERT INTO gpu_scheduler.job_counts SELECT ${CATEGORY("r")}, 0, count(*)
      FROM (SELECT status, started_at FROM gpu_scheduler.jobs UNION ALL SELECT status, started_at FROM gpu_scheduler.jobs_history) r GROUP BY 1;`;
const NEW_ROWS = "SELECT 1 AS k, status, started_at, client_id, priority FROM new_rows";
const OLD_ROWS = "SELECT -1 AS k, status, started_at, client_id, priority FROM old_rows";

const RECOUNT = recount();

/** The counting functions; `queued`: which statuses queued_counts counts (SQL after `status`). */
const counterFunctions = (create: string, queued?: string) => `      ${create} FUNCTION count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN ${countDeltas(NEW_ROWS, queued)}
        ELSIF TG_OP = 'DELETE' THEN ${countDeltas(OLD_ROWS, queued)}
        ELSE ${countDeltas(`${NEW_ROWS} UNION ALL ${OLD_ROWS}`, queued)}
        END IF;
        RETURN NULL;
      END $$;
      ${create} FUNCTION recount_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        ${recount(queued)}
        RETURN NULL;
      END $$;`;

/** The functions and triggers that keep the counters. */
const JOB_COUNTER_TRIGGERS = `${counterFunctions("CREATE")}
      CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
      CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
      CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
      CREATE TRIGGER jobs_count_truncate AFTER TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION recount_jobs();
      -- Archived jobs still count (as what they ended as) until retention removes them.
      CREATE TRIGGER jobs_history_count_insert AFTER INSERT ON jobs_history REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
      CREATE TRIGGER jobs_history_count_delete AFTER DELETE ON jobs_history REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
      CREATE TRIGGER jobs_history_count_truncate AFTER TRUNCATE ON jobs_history FOR EACH STATEMENT EXECUTE FUNCTION recount_jobs();
`;

/** Migration 11's counters: their functions, triggers and first count (applied text: it must not change). */
export const JOB_COUNTERS_SETUP = `${JOB_COUNTER_TRIGGERS}      ${RECOUNT}`;

/**
 * Migration 17: a job waiting for its dependencies (stored `waiting`) counts as queued in
 * queued_counts too (the queued-jobs limit, the accounts' standing), as clients see it.
 */
export const QUEUED_COUNTS_WITH_WAITING = `${counterFunctions("CREATE OR REPLACE", "IN ('queued', 'waiting')")}
      ${recount("IN ('queued', 'waiting')")}`;
