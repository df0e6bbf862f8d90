/**
 * The operators' repositories against the real PostgreSQL: the admin job search (filters, pages,
 * archived jobs merged in, and index plans over a large history in both tables, never a
 * sequential scan of it), and drains (written under
 * the placement lock, read by the placement snapshot) and losses.
 */
import { randomUUID } from "crypto";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { HistoryRepository } from "../../services/gpu-scheduler/store/history.repository";
import { JobSearchRepository } from "../../services/gpu-scheduler/store/job-search.repository";
import type { PublicStatus } from "../../services/gpu-scheduler/core/transitions";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { NodesRepository } from "../../services/gpu-scheduler/store/nodes.repository";
import { PlacementRepository } from "../../services/gpu-scheduler/store/placement.repository";
import { dropDatabase, testDatabaseUrl, waitFor } from "../support/platform";

const HISTORY = 20_000;
const ALICE = randomUUID();
const BOB = randomUUID();
const ADMIN = randomUUID();

describe("gpu-scheduler admin repositories - real PostgreSQL", () => {
  const url = testDatabaseUrl();
  let db: Pool;
  let search: JobSearchRepository;
  let nodes: NodesRepository;
  let places: PlacementRepository;

  beforeAll(async () => {
    await ensureDatabase(url);
    db = newPool({ connectionString: url, max: 4 });
    await migrate(db, "gpu_scheduler", migrations);
    // A long history: mostly completed jobs of many accounts, a few of alice's and bob's in every state.
    await db.query(
      `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, created_at, completed_at)
       SELECT gen_random_uuid(), gen_random_uuid(), '{"command": "old"}', '', 'completed', now(), now() FROM generate_series(1, $1)`,
      [HISTORY],
    );
    const add = (client: string, status: string, started: boolean) =>
      db.query(
        `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, created_at, started_at, node_id, gpu_uuid, holding)
         VALUES ($1, $2, jsonb_build_object('command', $3::text), '', $4, now(), $5, $6, $7, $8)`,
        [
          randomUUID(),
          client,
          `${status}${started ? "+started" : ""}`,
          status,
          started ? new Date() : null,
          ["assigned", "running"].includes(status) ? "gpu-node.a" : null,
          ["assigned", "running"].includes(status) ? randomUUID() : null,
          ["assigned", "running"].includes(status),
        ],
      );
    for (const client of [ALICE, BOB]) {
      await add(client, "queued", false);
      await add(client, "assigned", false);
      await add(client, "running", false); // placed, pulling its image: clients see it queued
      await add(client, "running", true);
      await add(client, "failed", true);
      await add(client, "cancelled", false);
    }
    // Archived jobs, moved by job-history.ts's own statement (those that ended a day ago; seq stays the job's).
    const ended = (client: string | null, status: string, n = 1) =>
      db.query(
        `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, created_at, completed_at)
         SELECT gen_random_uuid(), coalesce($2::uuid, gen_random_uuid()), jsonb_build_object('command', $3::text), '', $4, now() - interval '1 day', now() - interval '1 day'
         FROM generate_series(1, $1)`,
        [n, client, `${status}+archived`, status],
      );
    await ended(null, "completed", HISTORY);
    for (const client of [ALICE, BOB]) {
      await ended(client, "completed");
      await ended(client, "failed");
    }
    const history = new HistoryRepository(db);
    while ((await history.archive(new Date(Date.now() - 3600_000), 10_000)) > 0);
    const { rows: archived } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM gpu_scheduler.jobs_history");
    expect(archived[0].n).toBe(HISTORY + 4);
    await db.query("ANALYZE gpu_scheduler.jobs, gpu_scheduler.jobs_history");
    search = new JobSearchRepository(db);
    nodes = new NodesRepository(db);
    places = new PlacementRepository(db);
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await dropDatabase(url);
  });

  test.each<[string, { status?: PublicStatus; clientId?: string }, string[]]>([
    ["queued of one account: queued, placed and not yet started", { status: "queued", clientId: ALICE }, ["running", "assigned", "queued"]],
    ["running of one account: started only", { status: "running", clientId: ALICE }, ["running+started"]],
    ["failed of every account, archived ones included", { status: "failed" }, ["failed+archived", "failed+archived", "failed+started", "failed+started"]],
    ["completed of one account: archived only", { status: "completed", clientId: ALICE }, ["completed+archived"]],
    [
      "every status of one account",
      { clientId: BOB },
      ["failed+archived", "completed+archived", "cancelled", "failed+started", "running+started", "running", "assigned", "queued"],
    ],
  ])("gpu-scheduler admin repositories - %s, newest first", async (_name, filter, commands) => {
    const page = await search.search({ ...filter, limit: 50 });
    expect(page.rows.map((r) => r.spec.command)).toEqual(commands);
    if (filter.clientId) expect(page.rows.every((r) => r.client_id === filter.clientId)).toBe(true);
    expect(page.nextCursor).toBeNull();
  });

  test.each<[string, { status?: PublicStatus; clientId?: string }, number]>([
    ["queued (three stored states)", { status: "queued" }, 6],
    ["failed, across the queue table and the history", { status: "failed" }, 4],
    ["one account's, across both tables", { clientId: BOB }, 8],
  ])("gpu-scheduler admin repositories - pages of %s follow each other without gaps or repeats", async (_name, filter, total) => {
    const whole = await search.search({ ...filter, limit: 50 });
    const seen: string[] = [];
    let before: string | undefined;
    for (;;) {
      const page = await search.search({ ...filter, limit: 3, before });
      seen.push(...page.rows.map((r) => r.id));
      if (!page.nextCursor) break;
      before = page.nextCursor;
    }
    expect(seen).toEqual(whole.rows.map((r) => r.id));
    expect(seen).toHaveLength(total);
  });

  test.each<[string, { status?: PublicStatus; clientId?: string; before?: string }]>([
    ["no filter", {}],
    ["status", { status: "completed" }],
    ["queued (three stored states)", { status: "queued" }],
    ["account", { clientId: ALICE }],
    ["account and status", { clientId: ALICE, status: "completed" }],
    ["account and an unarchived status", { clientId: ALICE, status: "running" }],
    ["a later page", { status: "completed", before: "100" }],
  ])("gpu-scheduler admin repositories - %s: read through an index, no sequential scan of the history", async (_name, filter) => {
    const client = await db.connect();
    try {
      let plan = "";
      const spy = {
        query: (sql: string, params: unknown[]) =>
          client.query(`EXPLAIN ${sql}`, params).then((r) => ((plan = r.rows.map((x) => x["QUERY PLAN"]).join("\n")), { rows: [] })),
      };
      await new JobSearchRepository(spy as unknown as Pool).search({ ...filter, limit: 50 });
      expect(plan).toMatch(/Index/);
      expect(plan).not.toMatch(/Seq Scan/);
    } finally {
      client.release();
    }
  });

  test("gpu-scheduler admin repositories - a drain waits for the placement decision under way; every later snapshot reads it", async () => {
    let decided!: () => void;
    const deciding = new Promise<void>((resolve) => (decided = resolve));
    let drainedSeen: Set<string> | undefined;
    const pass = places.placeUnderLock(
      8,
      async (snapshot) => {
        drainedSeen = snapshot.drained;
        await deciding;
        return [];
      },
      new Date(),
    );
    while (drainedSeen === undefined) await new Promise((r) => setImmediate(r));
    let drainDone = false;
    const drain = nodes.setDraining("gpu-node.a", true, ADMIN, new Date("2026-01-01T00:00:00Z")).then((row) => ((drainDone = true), row));
    // The drain waits on the placement lock while the pass decides.
    await waitFor(
      async () =>
        (
          await db.query(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
          )
        ).rowCount,
      {
        message: "the drain waiting on the lock",
      },
    );
    expect(drainDone).toBe(false);
    expect([...drainedSeen]).toEqual([]);
    decided();
    await pass;
    expect(await drain).toMatchObject({ node_id: "gpu-node.a", draining: true, drained_by: ADMIN });

    await places.placeUnderLock(8, (snapshot) => ((drainedSeen = snapshot.drained), []), new Date());
    expect([...drainedSeen]).toEqual(["gpu-node.a"]);
    expect([...(await nodes.drained())]).toEqual(["gpu-node.a"]);

    // Draining again keeps the first drain; resuming clears it.
    const again = await nodes.setDraining("gpu-node.a", true, randomUUID(), new Date("2026-02-01T00:00:00Z"));
    expect(again).toMatchObject({ drained_by: ADMIN, drained_at: new Date("2026-01-01T00:00:00Z") });
    expect(await nodes.setDraining("gpu-node.a", false, ADMIN, new Date())).toMatchObject({ draining: false, drained_at: null, drained_by: null });
    expect([...(await nodes.drained())]).toEqual([]);
  });

  test("gpu-scheduler admin repositories - losses keep the latest time; running jobs per node", async () => {
    await nodes.markLost("gpu-node.b", new Date("2026-01-02T00:00:00Z"));
    await nodes.markLost("gpu-node.b", new Date("2026-01-01T00:00:00Z")); // a replica that noticed later, with an older clock
    expect((await nodes.find("gpu-node.b"))?.lost_at).toEqual(new Date("2026-01-02T00:00:00Z"));
    const running = await nodes.runningByNode();
    expect([...running.keys()]).toEqual(["gpu-node.a"]);
    expect(running.get("gpu-node.a")).toHaveLength(6); // alice's and bob's assigned, pulling and started jobs
  });
});
