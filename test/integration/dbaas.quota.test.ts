/**
 * dbaas storage quota against the real tenant cluster: a database filled past a tiny quota turns
 * read-only in a way its tenant cannot undo, keeps its reads, and gets its write rights back once
 * under the quota again (after TRUNCATE, or when an operator raises the quota).
 */
import { Client } from "pg";
import type { TestPlatform } from "../support/platform";
import type { DatabaseCreated, DatabaseDetail } from "../../services/dbaas/dbaas.service";
import type { QuotaReport } from "../../services/dbaas/quota";
import { callerMeta, dbaasApp, markerOf, refusal, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";

// An empty database from template0 is about 7.2 MiB; 3,500 rows of 1 kB take it past 9 MiB.
const QUOTA_MB = 9;
const FILL = "INSERT INTO big (payload) SELECT repeat('x', 1000) FROM generate_series(1, 3500)";

describe("dbaas quota", () => {
  let platform: TestPlatform;
  let db: DatabaseCreated;
  const meta = callerMeta();
  const detail = () => platform.broker.call<DatabaseDetail, object>("dbaas.get", { id: db.id }, { meta });
  const checkNow = () => platform.broker.call<QuotaReport>("dbaas.checkQuota");
  const tenant = <T>(work: (c: Client) => Promise<T>) => withClient(db.connectionString, work);

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_STORAGE_MB: String(QUOTA_MB) } });
    db = await platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta });
    await tenant(async (c) => {
      await c.query("CREATE TABLE big (id serial PRIMARY KEY, payload text NOT NULL)");
      await c.query("CREATE SCHEMA app; CREATE TABLE app.kv (k text PRIMARY KEY, v text); INSERT INTO app.kv VALUES ('a', '1')");
      // A SECURITY DEFINER routine would write with its owner's rights: read-only must stop it too.
      await c.query("CREATE FUNCTION app.sneak() RETURNS void LANGUAGE sql SECURITY DEFINER AS $$ INSERT INTO big (payload) VALUES ('sneak') $$");
    });
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas quota - under the quota: measured and writable", async () => {
    expect(await checkNow()).toMatchObject({ frozen: [], thawed: [] });
    const d = await detail();
    expect(d).toMatchObject({ maxStorageMb: QUOTA_MB, readOnly: false });
    expect(d.storageMb).toBeGreaterThan(5);
    expect(d.storageMb).toBeLessThan(QUOTA_MB);
  });

  it("dbaas quota - past the quota: read-only, sessions ended, writes refused even after SET default_transaction_read_only = off", async () => {
    const open = new Client({ connectionString: db.connectionString });
    open.on("error", () => undefined);
    await open.connect();
    try {
      await open.query(FILL);
      const report = await checkNow();
      expect(report.frozen).toEqual([db.id]);
      await expect(open.query("SELECT 1")).rejects.toThrow(); // the session that filled it was ended
    } finally {
      await open.end().catch(() => undefined);
    }
    const d = await detail();
    expect(d.readOnly).toBe(true);
    expect(d.storageMb).toBeGreaterThan(QUOTA_MB);
    await expect(platform.broker.call("dbaas.stats")).resolves.toMatchObject({ databasesByState: { active: 1, readOnly: 1 } });

    await tenant(async (c) => {
      // Reads still work.
      expect((await c.query("SELECT count(*)::int AS n FROM big")).rows[0].n).toBe(3500);
      expect((await c.query("SELECT v FROM app.kv")).rows).toEqual([{ v: "1" }]);
      await c.query("SET default_transaction_read_only = off");
      const writes = {
        insert: await refusal(c, "INSERT INTO big (payload) VALUES ('more')"),
        update: await refusal(c, "UPDATE app.kv SET v = '2'"),
        delete: await refusal(c, "DELETE FROM app.kv"),
        readWriteTransaction: await refusal(c, "BEGIN READ WRITE; INSERT INTO app.kv VALUES ('b', '2')"),
      };
      await c.query("ROLLBACK");
      const undo = {
        createTable: await refusal(c, "CREATE TABLE more (x int)"),
        createTemp: await refusal(c, "CREATE TEMP TABLE more (x int)"),
        createSchema: await refusal(c, "CREATE SCHEMA more"),
        alterOwner: await refusal(c, `ALTER TABLE big OWNER TO ${db.username}`),
        dropTable: await refusal(c, "DROP TABLE app.kv"),
        securityDefiner: await refusal(c, "SELECT app.sneak()"),
        largeObject: await refusal(c, "SELECT lo_from_bytea(0, 'data')"),
        sequence: await refusal(c, "SELECT nextval('big_id_seq')"),
      };
      for (const [what, code] of Object.entries({ ...writes, ...undo })) expect([what, code]).toEqual([what, "42501"]);
      // Granting itself rights back grants nothing: it owns nothing any more.
      await c.query(`GRANT ALL ON big TO ${db.username}`);
      expect(await refusal(c, "INSERT INTO big (payload) VALUES ('more')")).toBe("42501");
      await c.query(`ALTER ROLE ${db.username} SET default_transaction_read_only = off`); // its own settings: harmless
      expect(await refusal(c, "INSERT INTO big (payload) VALUES ('more')")).toBe("42501");
    });
    expect((await checkNow()).frozen).toEqual([]); // nothing changes while it stays over
    expect((await detail()).readOnly).toBe(true);
  });

  it("dbaas quota - TRUNCATE frees the space; back under the quota the tenant writes again", async () => {
    await tenant((c) => c.query("TRUNCATE big"));
    expect((await checkNow()).thawed).toEqual([db.id]);
    const d = await detail();
    expect(d.readOnly).toBe(false);
    expect(d.storageMb).toBeLessThan(QUOTA_MB);
    await tenant(async (c) => {
      await c.query("INSERT INTO big (payload) VALUES ('again'); UPDATE app.kv SET v = '2'");
      await c.query("SELECT app.sneak()");
      await c.query("CREATE TABLE more (x int); CREATE TEMP TABLE t (x int); SELECT lo_from_bytea(0, 'data')");
      expect((await c.query("SELECT count(*)::int AS n FROM big")).rows[0].n).toBe(2);
    });
  });

  it("dbaas quota - a crash between freezing and recording it heals at the next check", async () => {
    const server = dbaasApp(platform).tenant;
    // Frozen on the server, "writable" in the record, and under the quota: the check must thaw it.
    await server.freeze({ databaseName: db.databaseName, username: db.username }, await markerOf(platform));
    expect(await tenant(async (c) => refusal(c, "INSERT INTO big (payload) VALUES ('x')"))).toBe("42501");
    expect((await detail()).readOnly).toBe(false);
    expect((await checkNow()).thawed).toEqual([db.id]);
    await tenant((c) => c.query("INSERT INTO big (payload) VALUES ('healed')"));
  });

  it("dbaas quota - an operator raising the quota makes an over-quota database writable", async () => {
    await tenant((c) => c.query(FILL));
    expect((await checkNow()).frozen).toEqual([db.id]);
    const raised = await platform.broker.call<DatabaseDetail, object>("dbaas.setMaxStorage", { id: db.id, maxStorageMb: 64 });
    expect(raised).toMatchObject({ maxStorageMb: 64, readOnly: false });
    await tenant((c) => c.query("INSERT INTO big (payload) VALUES ('raised')"));
    await expect(platform.broker.call("dbaas.stats")).resolves.toMatchObject({ databasesByState: { active: 1, readOnly: 0 } });
  });
});
