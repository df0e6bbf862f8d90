/**
 * Batched statements - the plan of every statement that joins a batch (jsonb_to_recordset, unnest,
 * VALUES) to a large table, against the real PostgreSQL with tables of 5,000, 20,000 and 50,000
 * rows (the planner's choice changes with the size and the batch), with and without statistics. The repositories run their real SQL through a recording pool; each recorded
 * statement is then EXPLAINed with its own parameters and must not read the table sequentially
 * (issue 18: a Hash Join over a Seq Scan of jobs made each job event cost the whole table).
 */
import { randomUUID } from "crypto";
import { Pool, PoolClient, QueryConfig } from "pg";
// pg's own conversion of a parameter to its text form (arrays, dates, JSON); the package has no types for it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require("pg/lib/utils") as { prepareValue: (value: unknown) => unknown };
import { ConnectionStatement, ensureDatabase, migrate, newPool } from "../../lib/db";
import { DatabasesRepository } from "../../services/dbaas/databases.repository";
import { migrations as dbaasMigrations } from "../../services/dbaas/migrations";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { migrations as schedulerMigrations } from "../../services/gpu-scheduler/migrations";
import { PlacementRepository } from "../../services/gpu-scheduler/store/placement.repository";
import { dropDatabase, testDatabaseUrl } from "../support/platform";

/**
 * A statement as sent: its text and parameters; or one run as a prepared statement of its connection
 * (ConnectionStatement): its text and types as prepared, and its EXECUTE's arguments (SQL literals)
 * and the settings (SET LOCAL) of its transaction.
 */
type Recorded = { text: string; values?: unknown[]; executed?: { prepare: string; args: string; settings: string } };

/** A pool whose queries (its own and its clients') are recorded before they run. */
function recordingPool(pool: Pool, log: Recorded[]): Pool {
  const record = (text: string | QueryConfig, values?: unknown[]) =>
    log.push(typeof text === "string" ? { text, values } : { text: text.text, values: text.values ?? values });
  const wrap = <T extends Pool | PoolClient>(target: T): T =>
    new Proxy(target, {
      get(obj, key) {
        if (key === "query")
          return (text: string | QueryConfig, values?: unknown[]) => (record(text, values), (obj.query as (...a: unknown[]) => unknown)(text, values));
        if (key === "connect" && obj === pool) return async () => wrap(await pool.connect());
        const value = Reflect.get(obj, key) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(obj) : value;
      },
    });
  return wrap(pool);
}

/** The statements of a (possibly multi-statement) query text that read `table` and join a batch. */
function batchedStatements(log: Recorded[], table: string): Recorded[] {
  const batch = /jsonb_to_recordset|unnest\(\$|\(VALUES /;
  return log.flatMap((q) =>
    q.text
      .split(/;\s*\n/)
      .map((text) => text.trim())
      .filter((text) => text.includes(table) && batch.test(text) && !/^(BEGIN|COMMIT|PREPARE|EXECUTE)/.test(text))
      .map((text) => ({ text, values: q.values })),
  );
}

/** The runs of `statements` (prepared on their connection) in the log, as their text with their arguments and settings. */
function executedStatements(log: Recorded[], statements: ConnectionStatement[]): Recorded[] {
  return log.flatMap((q) =>
    statements.flatMap((statement) => {
      const run = new RegExp(`EXECUTE ${statement.name}\\(([\\s\\S]*)\\); COMMIT$`).exec(q.text);
      if (!run) return [];
      const settings = (q.text.match(/SET LOCAL [^;]*;/g) ?? []).join(" ");
      return [{ text: statement.text, executed: { prepare: statement.prepareSql.replace(statement.name, "batched"), args: run[1], settings } }];
    }),
  );
}

type PlanNode = { "Node Type": string; "Relation Name"?: string; Plans?: PlanNode[] };
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/**
 * "Seq Scan on <relation>" for every sequential scan of `relation` in the statement's plan: the plan
 * for its values, and the generic plan (for any values) that a prepared statement may keep.
 */
async function seqScans(pool: Pool, statement: Recorded, relation: string): Promise<string[]> {
  const client = await pool.connect();
  try {
    const found: string[] = [];
    const values = statement.values ?? [];
    const executed = statement.executed;
    // A statement prepared on its connection: planned (for its arguments, and generic) under its transaction's settings.
    const explainExecuted = async (mode: string) => {
      const results = (await client.query(
        `BEGIN; ${executed!.settings} SET LOCAL plan_cache_mode = ${mode}; ${executed!.prepare}; EXPLAIN (FORMAT JSON) EXECUTE batched(${executed!.args}); ROLLBACK; DEALLOCATE batched`,
      )) as unknown as Array<{ rows: unknown[] }>;
      return results[results.length - 3];
    };
    const explained = executed
      ? { "for its values": () => explainExecuted("force_custom_plan"), generic: () => explainExecuted("force_generic_plan") }
      : {
          // EXPLAIN plans a statement for its values, as PostgreSQL plans an unprepared one.
          "for its values": () => client.query(`EXPLAIN (FORMAT JSON) ${statement.text}`, values),
          // A prepared statement's generic plan, made without its values.
          generic: async () => {
            await client.query(`BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; PREPARE batched AS ${statement.text}`);
            try {
              // EXECUTE takes no parameters of its own: its values as literals, in pg's text form.
              const literal = (v: unknown) => (v === null || v === undefined ? "NULL" : client.escapeLiteral(String(prepareValue(v))));
              const args = values.length ? `(${values.map(literal).join(", ")})` : "";
              return await client.query(`EXPLAIN (FORMAT JSON) EXECUTE batched${args}`);
            } finally {
              await client.query("ROLLBACK; DEALLOCATE batched");
            }
          },
        };
    for (const [plan, explain] of Object.entries(explained)) {
      const { rows } = (await explain()) as { rows: Array<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }> };
      for (const n of nodes(rows[0]["QUERY PLAN"][0].Plan))
        if (n["Node Type"] === "Seq Scan" && n["Relation Name"] === relation) found.push(`Seq Scan on ${relation} (${plan})`);
    }
    return found;
  } finally {
    client.release();
  }
}

// Batches up to 1/500 of the table (and single rows): where a scan reads far more rows than the batch
// writes, and a job event's cost grows with the table instead of the batch.
describe.each([
  [5_000, 1],
  [5_000, 10],
  [20_000, 40],
  [50_000, 1],
  [50_000, 100],
])("batched statements - index access on %i rows, batches of %i", (ROWS, BATCH) => {
  const url = testDatabaseUrl();
  let pool: Pool;
  const clientId = randomUUID();

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 4 });
    await migrate(pool, "gpu_scheduler", schedulerMigrations);
    await migrate(pool, "dbaas", dbaasMigrations);
    // One INSERT … SELECT each: mostly finished history, a tenth still queued, across 50 accounts.
    await pool.query(
      `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, created_at, completed_at)
       SELECT gen_random_uuid(), CASE WHEN g % 50 = 0 THEN $2::uuid ELSE md5((g % 50)::text)::uuid END, '{"command": "true"}', '',
         CASE WHEN g % 10 = 0 THEN 'queued' ELSE 'completed' END, now(), CASE WHEN g % 10 = 0 THEN NULL ELSE now() END
       FROM generate_series(1, $1::int) g`,
      [ROWS, clientId],
    );
    await pool.query(
      `INSERT INTO dbaas.databases (id, client_id, database_name, username, status, max_storage_mb)
       SELECT gen_random_uuid(), 'c' || (g % 50), 'db_' || g, 'u_' || g, 'active', 1024 FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
  });

  afterAll(async () => {
    await pool?.end();
    await dropDatabase(url);
  });

  /** Runs every batched write of the repositories once and returns what they sent. */
  async function recordBatches(): Promise<{ log: Recorded[]; prepared: ConnectionStatement[] }> {
    const log: Recorded[] = [];
    const db = recordingPool(pool, log);
    const jobs = new JobsRepository(db);
    const { rows } = await pool.query<{ id: string }>(`SELECT id FROM gpu_scheduler.jobs WHERE status = 'queued' AND client_id = $1 LIMIT $2`, [
      clientId,
      2 * BATCH,
    ]);
    const ids = rows.map((r) => r.id);
    const [placed, queued] = [ids.slice(0, BATCH), ids.slice(BATCH)];
    const now = new Date();
    // a job event for each of the queued jobs (compare-and-set), as the event applier sends them
    const written = await jobs.compareAndSet(
      queued.map((id) => ({ id, seen: { status: "queued", holding: false, nodeId: null, gpuUuid: null }, patch: { statusReason: "waiting" } })),
    );
    expect(written).toEqual(new Set(queued));
    await jobs.insert([{ id: randomUUID(), clientId, spec: { command: "true", timeoutSeconds: 60 } }], now);
    const node = `node-${randomUUID()}`;
    const placements = placed.map((jobId) => ({ jobId, nodeId: node, gpuUuid: jobId, gpuUuids: [jobId], gpuName: "card" }));
    const { assigned } = await new PlacementRepository(db).placeUnderLock(10 * BATCH, () => placements, now);
    expect(assigned.map((a) => a.id).sort()).toEqual([...placed].sort());
    const dbIds = await pool.query<{ id: string }>(`SELECT id FROM dbaas.databases LIMIT $1`, [BATCH]);
    await new DatabasesRepository(db).recordSizes(dbIds.rows.map((r, i) => ({ id: r.id, bytes: 1000 * i })));
    return { log, prepared: [jobs.compareAndSetStatement] };
  }

  async function expectNoSeqScans() {
    const { log, prepared } = await recordBatches();
    const jobStatements = [...batchedStatements(log, "gpu_scheduler.jobs"), ...executedStatements(log, prepared)];
    const databaseStatements = batchedStatements(log, "dbaas.databases");
    // the writes that join a batch to the table: compare-and-set and the placement commit; the size update
    expect(jobStatements.filter((s) => /UPDATE gpu_scheduler\.jobs/.test(s.text))).toHaveLength(2);
    expect(databaseStatements).toHaveLength(1);
    const planned = [
      ...(await Promise.all(jobStatements.map(async (s) => ({ statement: s.text, scans: await seqScans(pool, s, "jobs") })))),
      ...(await Promise.all(databaseStatements.map(async (s) => ({ statement: s.text, scans: await seqScans(pool, s, "databases") })))),
    ];
    expect(planned.filter((p) => p.scans.length)).toEqual([]);
  }

  it("batched statements - no sequential scan before statistics exist", async () => {
    const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM gpu_scheduler.jobs`);
    expect(Number(rows[0].n)).toBeGreaterThanOrEqual(ROWS);
    await expectNoSeqScans();
  });

  it("batched statements - no sequential scan with statistics", async () => {
    await pool.query(`ANALYZE gpu_scheduler.jobs; ANALYZE dbaas.databases`);
    await expectNoSeqScans();
  });
});
