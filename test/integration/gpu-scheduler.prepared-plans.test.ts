/**
 * The statements the scheduler prepares on each connection (lib/db.ts ConnectionStatement): after
 * PostgreSQL has run one enough times on a connection to keep a plan for any values (generic), that
 * kept plan still reads jobs through its primary key. The table is small here on purpose: a plan
 * made while it was small and kept as it grew read the whole table on every job event, since a
 * sequential scan is the cheapest read of a few hundred rows (seen in bench:slurm: about 1,000 rows
 * read per compare-and-set of 1,000 jobs).
 */
import { randomUUID } from "crypto";
import { Pool } from "pg";
import { compareAndSetValues, JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { INDEX_READS } from "../../services/gpu-scheduler/store/placement.repository";
import { dropDatabase, testDatabaseUrl } from "../support/platform";
import { schedulerDatabase } from "../support/scheduler-db";

type PlanNode = { "Node Type": string; "Relation Name"?: string; "Index Name"?: string; Plans?: PlanNode[] };
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

describe("gpu-scheduler prepared plans", () => {
  const url = testDatabaseUrl();
  let pool: Pool;

  beforeAll(async () => {
    // One connection: every call runs on the connection that keeps the statement and its plans.
    pool = await schedulerDatabase(url, 1);
    await pool.query(
      `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, created_at, priority)
       SELECT gen_random_uuid(), $1, '{"command": "true"}', '', 'queued', now(), 1 FROM generate_series(1, 200)`,
      [randomUUID()],
    );
    await pool.query("ANALYZE gpu_scheduler.jobs");
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  test("gpu-scheduler prepared plans - the compare-and-set's kept plan reads jobs by primary key on a small table", async () => {
    const repo = new JobsRepository(pool);
    const { rows } = await pool.query<{ id: string }>(`SELECT id FROM gpu_scheduler.jobs ORDER BY seq LIMIT 12`);
    const seen = { status: "queued" as const, holding: false, nodeId: null, gpuUuid: null };
    // More calls than the five after which PostgreSQL may switch to its generic plan.
    for (const [i, { id }] of rows.entries()) expect([...(await repo.compareAndSet([{ id, seen, patch: { statusReason: `call ${i}` } }]))]).toEqual([id]);

    // The plan this connection now uses for the statement, under the settings it runs with.
    const statement = repo.compareAndSetStatement;
    const probe = [{ id: rows[0].id, seen, patch: { statusReason: "probe" } }];
    const client = await pool.connect();
    try {
      const execute = statement.executeSql(client, compareAndSetValues(probe));
      expect(execute.startsWith("EXECUTE ")).toBe(true); // prepared on this connection already: no PREPARE again
      const results = (await client.query(`BEGIN; ${INDEX_READS}; EXPLAIN (FORMAT JSON) ${execute}; ROLLBACK`)) as unknown as Array<{
        rows: Array<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>;
      }>;
      const plan = nodes(results[results.length - 2].rows[0]["QUERY PLAN"][0].Plan);
      const onJobs = plan.filter((n) => n["Relation Name"] === "jobs");
      expect(onJobs.filter((n) => n["Node Type"] === "Seq Scan")).toEqual([]);
      expect(onJobs.map((n) => n["Index Name"])).toContain("jobs_pkey");
    } finally {
      client.release();
    }
  });
});
