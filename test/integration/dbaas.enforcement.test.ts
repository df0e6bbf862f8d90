/**
 * dbaas quota enforcement that keeps up with the tenant (issue 20), against the scram tenant
 * cluster: long transactions do not postpone a freeze, a frozen database is verified again every
 * round, and logins a crashed freeze left blocked come back.
 */
import { Client } from "pg";
import type { TestPlatform } from "../support/platform";
import { waitFor } from "../support/platform";
import type { DatabaseCreated, DatabaseDetail } from "../../services/dbaas/dbaas.service";
import type { QuotaReport } from "../../services/dbaas/quota";
import { asAdmin, callerMeta, databaseBytes, refusal, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";

const MIB = 1048576;
// An empty database from template0, once connected to, is about 7.4 MiB.
const QUOTA_MB = 9;
/** About 2 MB of rows (1 kB each, below the TOAST threshold, so not compressed). */
const INSERT_2MB = "INSERT INTO big (payload) SELECT md5(random()::text) || repeat('x', 968) FROM generate_series(1, 2000)";

type Writers = { refusals: string[]; stop(): Promise<void> };

/**
 * `n` sessions looping `BEGIN; INSERT 2 MB; SELECT pg_sleep(sleepS); COMMIT`, reconnecting
 * whenever they are ended or refused, until stopped; `refusals` collects the SQLSTATEs seen.
 */
function writers({ connectionString, username }: DatabaseCreated, n: number, sleepS: number): Writers {
  let stopped = false;
  const refusals: string[] = [];
  const loop = async () => {
    while (!stopped) {
      const c = new Client({ connectionString });
      c.on("error", () => undefined);
      try {
        await c.connect();
        while (!stopped) {
          await c.query("BEGIN");
          await c.query(INSERT_2MB);
          await c.query(`SELECT pg_sleep(${sleepS})`);
          await c.query("COMMIT");
        }
      } catch (err) {
        const code = String((err as { code?: string }).code ?? "closed");
        refusals.push(code);
        // Ended sessions come straight back (as a hostile client would); refused ones are paced (load generator, not a wait).
        if (code !== "closed" && code !== "57P01") await new Promise((resolve) => setTimeout(resolve, 50));
      } finally {
        await c.end().catch(() => undefined);
      }
    }
  };
  const runs = Array.from({ length: n }, loop);
  return {
    refusals,
    async stop() {
      stopped = true;
      await asAdmin((a) => a.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", [username]));
      await Promise.all(runs);
    },
  };
}

describe("dbaas enforcement", () => {
  let platform: TestPlatform;
  const meta = callerMeta();
  const checkNow = () => platform.broker.call<QuotaReport>("dbaas.checkQuota");
  const create = () => platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta });
  const detail = (id: string) => platform.broker.call<DatabaseDetail, object>("dbaas.get", { id }, { meta });
  const connLimit = async (username: string) =>
    asAdmin(async (a) => (await a.query<{ n: number }>("SELECT rolconnlimit AS n FROM pg_roles WHERE rolname = $1", [username])).rows[0].n);

  beforeAll(async () => {
    // Only checkNow's rounds act: a fresh database here is near its quota (7.4 of 9 MiB), so the
    // tick (every 1 s by default) would race them to the freeze and leave them nothing to report.
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_STORAGE_MB: String(QUOTA_MB), DBAAS_QUOTA_CHECK_S: "3600", DBAAS_QUOTA_NEAR_CHECK_S: "3600" } });
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas enforcement - sessions looping BEGIN; INSERT 2 MB; pg_sleep; COMMIT do not postpone the freeze: it lands in one round, logins restored after", async () => {
    const db = await create();
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE big (id serial PRIMARY KEY, payload text NOT NULL)"));
    const limitBefore = await connLimit(db.username);
    expect(limitBefore).toBeGreaterThan(0);
    const load = writers(db, 4, 4);
    try {
      // Over the quota, with a write transaction open (holding its lock on `big`) right now.
      await waitFor(async () => (await databaseBytes(db.databaseName)) > QUOTA_MB * MIB, { timeoutMs: 30_000, message: "the writers to pass the quota" });
      await waitFor(
        () =>
          asAdmin(async (a) => (await a.query("SELECT 1 FROM pg_stat_activity WHERE usename = $1 AND backend_xid IS NOT NULL", [db.username])).rowCount! > 0),
        { message: "a write transaction to be open" },
      );
      const report = await checkNow();
      expect(report).toMatchObject({ frozen: [db.id], failed: [] });
      expect((await detail(db.id)).readOnly).toBe(true);
      // Not locked out (the last resort): the tenant still connects and reads; its writers are refused.
      await withClient(db.connectionString, async (c) => {
        await expect(c.query("SELECT count(*) FROM big")).resolves.toMatchObject({ rowCount: 1 });
        expect(await refusal(c, INSERT_2MB)).toBe("42501");
      });
      await waitFor(() => load.refusals.includes("42501"), { message: "the writers to be refused" });
    } finally {
      await load.stop();
    }
    expect(await connLimit(db.username)).toBe(limitBefore);
  });

  it("dbaas enforcement - a frozen database is verified every round: objects created after the freeze in a schema granted to PUBLIC before it are frozen again", async () => {
    const db = await create();
    await withClient(db.connectionString, async (c) => {
      await c.query("CREATE SCHEMA s2; GRANT ALL ON SCHEMA s2 TO PUBLIC; CREATE TABLE big (id serial PRIMARY KEY, payload text NOT NULL)");
      await c.query(INSERT_2MB);
    });
    expect((await checkNow()).frozen).toEqual([db.id]);
    // The grant to PUBLIC survives the freeze, as under a freeze that missed it (one from before
    // grants to PUBLIC were revoked): the tenant creates and fills a table there while read-only.
    await asAdmin((a) => a.query("GRANT ALL ON SCHEMA s2 TO PUBLIC"), db.databaseName);
    await withClient(db.connectionString, (c) =>
      c.query("CREATE TABLE s2.late AS SELECT md5(random()::text) || repeat('x', 968) AS payload FROM generate_series(1, 2000)"),
    );
    expect((await detail(db.id)).readOnly).toBe(true); // the API says read-only all along

    const report = await checkNow();
    expect(report).toMatchObject({ refrozen: [db.id], frozen: [], failed: [] });
    const owner = await asAdmin(
      async (a) => (await a.query("SELECT tableowner FROM pg_tables WHERE schemaname = 's2' AND tablename = 'late'")).rows[0],
      db.databaseName,
    );
    expect(owner).toEqual({ tableowner: db.username.replace(/^user_/, "hold_") });
    const grown = await databaseBytes(db.databaseName);
    await withClient(db.connectionString, async (c) => {
      expect(await refusal(c, "INSERT INTO s2.late SELECT repeat('y', 1000) FROM generate_series(1, 1000)")).toBe("42501");
      expect(await refusal(c, "CREATE TABLE s2.later (x int)")).toBe("42501");
      expect((await c.query("SELECT count(*)::int AS n FROM s2.late")).rows[0].n).toBe(2000); // still readable
    });
    expect(await databaseBytes(db.databaseName)).toBeLessThan(grown + MIB);
    // Nothing left to find: the next round changes nothing.
    expect(await checkNow()).toMatchObject({ refrozen: [], frozen: [], failed: [] });
  });

  it("dbaas enforcement - a role left at CONNECTION LIMIT 0 by a crashed freeze gets its share back at the next reconciler pass", async () => {
    const db = await create();
    const share = await connLimit(db.username);
    await asAdmin((a) => a.query(`ALTER ROLE "${db.username}" CONNECTION LIMIT 0`));
    await expect(withClient(db.connectionString, async () => undefined)).rejects.toMatchObject({ code: "53300" });
    await platform.broker.call("dbaas.reconcile", {});
    expect(await connLimit(db.username)).toBe(share);
    await withClient(db.connectionString, (c) => c.query("SELECT 1"));
  });
});

describe("dbaas enforcement - the quota tick", () => {
  const QUOTA = 20;
  let platform: TestPlatform;
  const meta = callerMeta();
  const readOnly = async (id: string) => (await platform.broker.call<DatabaseDetail, object>("dbaas.get", { id }, { meta })).readOnly;

  beforeAll(async () => {
    // A tick every 0.3 s; the full round (every database measured) never comes during the test.
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_STORAGE_MB: String(QUOTA), DBAAS_QUOTA_NEAR_CHECK_S: "0.3", DBAAS_QUOTA_CHECK_S: "3600" } });
  });
  afterAll(() => stopDbaasPlatform(platform));

  const fresh = async () => {
    const db = await platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta });
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE big (id serial PRIMARY KEY, payload text NOT NULL)"));
    expect(await databaseBytes(db.databaseName)).toBeLessThan(0.8 * QUOTA * MIB); // far from the quota: not near
    return db;
  };

  it("dbaas enforcement - committed bursts far from the quota get the database measured at the next tick and frozen", async () => {
    const db = await fresh();
    // 8 × 2 MB committed: past the quota from below 80 % of it, between two ticks or across a few.
    await withClient(db.connectionString, async (c) => {
      for (let i = 0; i < 8; i++) await c.query(INSERT_2MB);
    }).catch(() => undefined); // the freeze may end this session
    await waitFor(() => readOnly(db.id), { timeoutMs: 10_000, message: "the tick to freeze the busy database" });
  });

  it("dbaas enforcement - one long uncommitted write transaction (no counter moves) gets the database measured and frozen", async () => {
    const db = await fresh();
    const c = new Client({ connectionString: db.connectionString });
    c.on("error", () => undefined);
    await c.connect();
    try {
      await c.query("BEGIN");
      for (let i = 0; i < 8; i++) await c.query(INSERT_2MB);
      const sleeping = c.query("SELECT pg_sleep(60)").catch((err: { code?: string }) => err.code);
      await waitFor(() => readOnly(db.id), { timeoutMs: 10_000, message: "the tick to freeze the database under a long transaction" });
      expect(await sleeping).toBe("57P01"); // its session was ended by the freeze
    } finally {
      await c.end().catch(() => undefined);
    }
  });
});
