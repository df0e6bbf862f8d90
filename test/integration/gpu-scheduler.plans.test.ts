/**
 * The hot queries of a deep queue with a long history are planned through their indexes: on a queue
 * table holding 20,000 queued jobs of 100 accounts and 100,000 ended ones (plus 100,000 archived),
 * seeded with one INSERT … SELECT generate_series each, with statistics taken before the queue
 * filled (stale: this machine's PostgreSQL runs without autovacuum) and after ANALYZE. The
 * repositories' SQL is captured as they run it and EXPLAINed with the same parameters.
 */
import { randomUUID } from "crypto";
import { escapeLiteral, Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { HistoryRepository } from "../../services/gpu-scheduler/store/history.repository";
import { compareAndSetValues, JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { INDEX_READS, PlacementRepository, SNAPSHOT_PLANNING, snapshotSql } from "../../services/gpu-scheduler/store/placement.repository";
import { dropDatabase, testDatabaseUrl } from "../support/platform";

type PlanNode = { "Node Type": string; "Relation Name"?: string; "Index Name"?: string; Plans?: PlanNode[] };
type Scan = { type: string; relation?: string; index?: string };

/** Every node of a plan, flattened. */
const scans = (node: PlanNode): Scan[] => [
  { type: node["Node Type"], relation: node["Relation Name"], index: node["Index Name"] },
  ...(node.Plans ?? []).flatMap(scans),
];

const QUEUED = 20_000;
const ENDED = 100_000;

describe("gpu-scheduler plans - deep queue, long history", () => {
  const url = testDatabaseUrl();
  let pool: Pool;
  /** The statements the repositories ran, with their parameters. */
  let captured: Array<{ sql: string; params?: unknown[] }> = [];
  let spy: Pool;
  const explain = async (sql: string, params?: unknown[]): Promise<Scan[]> => {
    const { rows } = await pool.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
    return scans(rows[0]["QUERY PLAN"][0].Plan);
  };
  /** The plan of the last statement `run` made (the one before it, if any, reads the catalogue once). */
  const planOf = async (run: () => Promise<unknown>): Promise<Scan[]> => {
    captured = [];
    await run();
    const last = captured[captured.length - 1];
    return explain(last.sql, last.params);
  };
  const onJobs = (plan: Scan[]) => plan.filter((s) => s.relation === "jobs");
  const seqScans = (plan: Scan[]) => onJobs(plan).filter((s) => s.type === "Seq Scan");
  let client: string;
  let someQueued: string;
  let someArchived: string;

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 4 });
    pool.on("error", () => undefined);
    await migrate(pool, "gpu_scheduler", migrations);
    spy = {
      // A statement as text and parameters, or as a (prepared) query's config.
      query: (query: string | { text: string; values?: unknown[] }, params?: unknown[]) => {
        captured.push(typeof query === "string" ? { sql: query, params } : { sql: query.text, params: query.values });
        return typeof query === "string" ? pool.query(query, params) : pool.query(query);
      },
    } as unknown as Pool;
    const accounts = Array.from({ length: 100 }, () => randomUUID());
    client = accounts[0];
    const seed = (n: number, status: string, endedHoursAgo: number) =>
      pool.query(
        `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, created_at, completed_at, priority)
         SELECT gen_random_uuid(), ($1::uuid[])[1 + i % 100], '{"command": "true"}', '', $2, now(),
           CASE WHEN $2 = 'queued' THEN NULL ELSE now() - make_interval(hours => $4) END, (i % 3)::smallint
         FROM generate_series(1, $3::int) i`,
        [accounts, status, n, endedHoursAgo],
      );
    // The archived ones ended before the others, and moved in one statement.
    await seed(ENDED, "completed", 3);
    expect(await new HistoryRepository(pool).archive(new Date(Date.now() - 7_200_000), ENDED)).toBe(ENDED);
    await seed(ENDED, "completed", 1);
    // Statistics of a table with no queued job, then the queue fills: the worst case for the planner.
    await pool.query("ANALYZE gpu_scheduler.jobs, gpu_scheduler.jobs_history");
    await seed(QUEUED, "queued", 0);
    someQueued = (await pool.query(`SELECT id FROM gpu_scheduler.jobs WHERE status = 'queued' AND client_id = $1 LIMIT 1`, [client])).rows[0].id;
    someArchived = (await pool.query(`SELECT id FROM gpu_scheduler.jobs_history WHERE client_id = $1 LIMIT 1`, [client])).rows[0].id;
  }, 120_000);
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  for (const analyzed of [false, true]) {
    test(`gpu-scheduler plans - hot queries read through their indexes (${analyzed ? "after ANALYZE" : "statistics from before the queue filled"})`, async () => {
      if (analyzed) await pool.query("ANALYZE gpu_scheduler.jobs, gpu_scheduler.jobs_history");
      const repo = new JobsRepository(spy);
      const history = new HistoryRepository(spy);

      // anyQueued: one probe of the queue index, never a scan of the table.
      const anyQueued = await planOf(() => new PlacementRepository(spy).anyQueued());
      expect(onJobs(anyQueued)).toEqual([{ type: expect.stringMatching(/^Index (Only )?Scan$/), relation: "jobs", index: "jobs_queue" }]);

      // Depth and counts: the counters only.
      for (const run of [() => repo.queueDepth(), () => repo.countByStatus()]) {
        expect(new Set((await planOf(run)).filter((s) => s.relation).map((s) => s.relation))).toEqual(new Set(["job_counts"]));
      }

      // The accounts waiting: counters, usage, and the held cards through the index of held cards.
      const accounts = await planOf(() => repo.queueAccounts());
      expect(seqScans(accounts)).toEqual([]);
      expect(accounts.some((s) => s.relation === "queued_counts")).toBe(true);

      // A job read (queued or archived): primary keys; the list: each table's (client, seq) index.
      const find = await planOf(() => repo.findForClient(someArchived, client));
      expect(find.filter((s) => s.relation).map((s) => s.index)).toEqual(["jobs_pkey", "jobs_history_pkey"]);
      const list = await planOf(() => repo.listForClient(client, 50));
      expect(list.filter((s) => s.relation).map((s) => s.index)).toEqual(["jobs_by_client", "jobs_history_by_client"]);

      // A queued job's place: its row by key, its account's jobs ahead through an account index.
      const standing = await planOf(() => repo.queueStanding([someQueued]));
      expect(seqScans(standing)).toEqual([]);
      expect(standing.map((s) => s.index)).toContain("jobs_pkey");
      // Its count of the same priority needs fresh statistics (housekeeping ANALYZEs the table, job-history.ts).
      if (analyzed) expect(standing.map((s) => s.index)).toContainEqual(expect.stringMatching(/^jobs_queue_by_account/));

      // Placement's snapshot: pairs skipped through the per-account index, never the table; the
      // plan a prepared statement keeps (generic: planned without its parameters' values) included.
      const tx = await pool.connect();
      const snapshot = await tx
        .query(
          `BEGIN; ${SNAPSHOT_PLANNING}; SET LOCAL plan_cache_mode = force_generic_plan; PREPARE snapshot AS ${snapshotSql(3600)};
           EXPLAIN (FORMAT JSON) EXECUTE snapshot(now(), ${QUEUED})`,
        )
        .then((r) => {
          const results = r as unknown as Array<{ rows: Array<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }> }>;
          return scans(results[results.length - 1].rows[0]["QUERY PLAN"][0].Plan);
        })
        .finally(() => tx.query("ROLLBACK; DEALLOCATE snapshot").finally(() => tx.release()));
      expect(seqScans(snapshot)).toEqual([]);
      expect(onJobs(snapshot).map((s) => s.index)).toEqual(expect.arrayContaining(["jobs_queue_by_account"]));
      expect(onJobs(snapshot).filter((s) => s.index === "jobs_queue" || s.index === "jobs_queue_by_type")).toEqual([]);

      // Archiving and retention: the oldest ended jobs through their indexes.
      const archive = await planOf(() => history.archive(new Date(0), 10));
      expect(archive.filter((s) => s.type === "Seq Scan")).toEqual([]);
      expect(archive.map((s) => s.index)).toContain("jobs_ended");
      const purge = await planOf(() => history.purge(new Date(0), 10));
      expect(purge.filter((s) => s.type === "Seq Scan" && s.relation !== "job_attempts")).toEqual([]);
      expect(purge.map((s) => s.index)).toContain("jobs_history_completed");

      // Every job change (events, cancels, housekeeping): the jobs by primary key, never a join over the
      // table; in the plan for the values and in the one a connection keeps for any values (generic),
      // each made under the settings the statement runs with (INDEX_READS).
      const { rows } = await pool.query(`SELECT id FROM gpu_scheduler.jobs WHERE status = 'queued' LIMIT 1`);
      const seen = { status: "queued" as const, holding: false, nodeId: null, gpuUuid: null };
      const updates = [{ id: rows[0].id, seen, patch: { status: "cancelled" as const, completedAt: new Date() } }];
      for (const mode of ["auto", "force_generic_plan"]) {
        const statement = repo.compareAndSetStatement;
        const values = compareAndSetValues(updates).map((v) => escapeLiteral(v));
        const results = (await pool.query(
          `BEGIN; ${INDEX_READS}; SET LOCAL plan_cache_mode = ${mode}; ${statement.prepareSql};
           EXPLAIN (FORMAT JSON) EXECUTE ${statement.name}(${values.join(", ")}); ROLLBACK; DEALLOCATE ${statement.name}`,
        )) as unknown as Array<{ rows: Array<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }> }>;
        const cas = scans(results[results.length - 3].rows[0]["QUERY PLAN"][0].Plan);
        expect(seqScans(cas)).toEqual([]);
        expect(cas.map((s) => s.index)).toContain("jobs_pkey");
      }
    });
  }
});
