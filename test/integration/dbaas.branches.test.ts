/**
 * Branches (POST /api/databases with fromSnapshot) and maxStorageMb against the real tenant
 * cluster: the branch holds the snapshot's data (not the source's later writes), its own role owns
 * everything, the source's role has no way in; another account's snapshot is 404; a fault after
 * each step, or a dump pg_restore cannot finish, leaves no role, database or record; bad input is
 * 400 and changes nothing; the account's storage quota is 403 with {resource, limit, used}.
 */
import { randomUUID } from "crypto";
import { promises as fs } from "fs";
import path from "path";
import type { TestPlatform } from "../support/platform";
import { BRANCH_STEPS, Provisioner } from "../../services/dbaas/provisioner";
import type { TenantNames } from "../../services/dbaas/naming";
import {
  asAdmin,
  callerMeta,
  connectRefusal,
  dbaasApp,
  existing,
  injectFaults,
  namesOf,
  psql,
  records,
  startDbaasPlatform,
  stopDbaasPlatform,
  withClient,
} from "./dbaas.helpers";

type Created = { id: string; databaseName: string; username: string; password: string; connectionString: string };
type Snap = { id: string; status: string };

describe("dbaas branches", () => {
  let platform: TestPlatform;
  let source: Created;
  let snap: Snap;
  const owner = callerMeta();
  const call = <T>(action: string, params: object, meta = owner) => platform.broker.call<T, object>(`dbaas.${action}`, params, { meta });
  const snapshotter = () => dbaasApp(platform).snapshotter;
  const tables = async (connectionString: string) =>
    withClient(connectionString, async (c) => (await c.query("SELECT id, title, (SELECT count(*)::int FROM items) AS items FROM todo ORDER BY id")).rows);

  beforeAll(async () => {
    platform = await startDbaasPlatform({
      env: { DBAAS_MAX_PER_ACCOUNT: "8", DBAAS_MAX_STORAGE_MB: "500", QUOTA_STORAGE_MB: "2000", DBAAS_SNAPSHOTS_PER_ACCOUNT: "2" },
    });
    source = await call<Created>("create", { maxStorageMb: 100 });
    await withClient(source.connectionString, (c) =>
      c.query(`CREATE TABLE todo (id serial PRIMARY KEY, title text NOT NULL);
               INSERT INTO todo (title) VALUES ('one'), ('two');
               CREATE TABLE items AS SELECT g AS n FROM generate_series(1, 5000) g;
               CREATE VIEW titles AS SELECT title FROM todo;
               CREATE FUNCTION twice(n int) RETURNS int LANGUAGE sql AS 'SELECT n * 2';
               CREATE SCHEMA app; CREATE TABLE app.settings (k text PRIMARY KEY, v text);
               COMMENT ON TABLE todo IS 'kept';
               GRANT SELECT ON todo TO PUBLIC;
               SELECT lo_from_bytea(0, 'blob')`),
    );
    snap = await call<Snap>("createSnapshot", { id: source.id });
    await snapshotter().settled();
    expect((await call<Snap>("getSnapshot", { id: snap.id })).status).toBe("ready");
    // Written after the snapshot: a branch must not see it.
    await withClient(source.connectionString, (c) => c.query("INSERT INTO todo (title) VALUES ('after')"));
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas branches - the branch holds the snapshot's data, owned by its own role; the source's role has no access", async () => {
    const branch = await call<Created>("create", { fromSnapshot: snap.id });
    expect(branch.databaseName).not.toBe(source.databaseName);
    expect(await tables(branch.connectionString)).toEqual([
      { id: 1, title: "one", items: 5000 },
      { id: 2, title: "two", items: 5000 },
    ]);
    // Works for the client with psql too: the view, the function, the sequence going on from the snapshot.
    const run = psql(branch.connectionString, "SELECT twice(21)", "INSERT INTO todo (title) VALUES ('three') RETURNING id", "SELECT count(*) FROM titles");
    expect([run.status, run.stdout.trim().split("\n")]).toEqual([0, ["42", "3", "INSERT 0 1", "3"]]);

    const ownership = await asAdmin(
      async (c) =>
        (
          await c.query(
            `SELECT (SELECT array_agg(DISTINCT pg_get_userbyid(relowner)::text) FROM pg_class c JOIN pg_namespace n ON n.oid = relnamespace
                      WHERE nspname IN ('public', 'app')) AS tables,
                    (SELECT array_agg(DISTINCT pg_get_userbyid(proowner)::text) FROM pg_proc p JOIN pg_namespace n ON n.oid = pronamespace WHERE nspname = 'public') AS functions,
                    (SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'app') AS schema,
                    (SELECT array_agg(DISTINCT pg_get_userbyid(lomowner)::text) FROM pg_largeobject_metadata) AS blobs,
                    (SELECT count(*)::int FROM pg_class c, aclexplode(c.relacl) a WHERE a.grantee = 0 AND c.relname = 'todo') AS public_grants,
                    (SELECT count(*)::int FROM pg_shdepend WHERE refobjid = to_regrole($1) AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())) AS source_refs`,
            [source.username],
          )
        ).rows[0],
      branch.databaseName,
    );
    expect(ownership).toEqual({
      tables: [branch.username],
      functions: [branch.username],
      schema: branch.username,
      blobs: [branch.username],
      public_grants: 0,
      source_refs: 0,
    });
    // The source's credentials open nothing of the branch.
    const url = new URL(source.connectionString);
    url.pathname = `/${branch.databaseName}`;
    expect(await connectRefusal(url.toString())).toBe("42501");
  });

  it("dbaas branches - another account's snapshot is 404, a pending one 409, and neither creates anything", async () => {
    const stranger = callerMeta();
    for (const fromSnapshot of [snap.id, randomUUID(), "not-a-uuid"])
      await expect(call("create", { fromSnapshot }, stranger)).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
    const pending = randomUUID();
    await dbaasApp(platform).snapshots.insertPending({
      id: pending,
      clientId: stranger.caller.clientId,
      databaseId: source.id,
      databaseName: source.databaseName,
      owner: randomUUID(),
    });
    await expect(call("create", { fromSnapshot: pending }, stranger)).rejects.toMatchObject({ code: 409, type: "INVALID_STATE" });
    expect(await call<{ databases: unknown[] }>("list", {}, stranger)).toEqual({ databases: [] });
  });

  it("dbaas branches - bad input is 400 and creates nothing", async () => {
    const meta = callerMeta();
    for (const body of [
      { maxStorageMb: 0 },
      { maxStorageMb: -5 },
      { maxStorageMb: 1.5 },
      { maxStorageMb: "100" },
      { maxStorageMb: 501 },
      { fromSnapshot: 7 },
      { fromSnapshot: "" },
    ])
      // The broker's own validation error (422) is what the gateway answers as 400 VALIDATION_FAILED (e2e checks that).
      await expect(call("create", body, meta)).rejects.toMatchObject({ type: expect.stringMatching(/^VALIDATION_(FAILED|ERROR)$/) });
    expect(await call<{ databases: unknown[] }>("list", {}, meta)).toEqual({ databases: [] });
    const sized = await call<Created>("create", { maxStorageMb: 500 }, meta);
    expect(await call("get", { id: sized.id }, meta)).toMatchObject({ maxStorageMb: 500 });
  });

  it("dbaas branches - the account's storage quota (QUOTA_STORAGE_MB) counts its databases' maxima and snapshots: 403 with resource, limit, used", async () => {
    const meta = callerMeta();
    for (let i = 0; i < 3; i++) await call("create", { maxStorageMb: 500 }, meta);
    // 1500 MB reserved: 500 more fit exactly, 501 do not; the limit of 500 per database is a 400 first.
    await expect(call("create", { maxStorageMb: 500 }, meta)).resolves.toMatchObject({ id: expect.any(String) });
    const refused = await call("create", { maxStorageMb: 1 }, meta).catch((err: { code: number; type: string; data: unknown }) => err);
    expect(refused).toMatchObject({ code: 403, type: "QUOTA_EXCEEDED", data: { resource: "storageMb", limit: 2000, used: 2000 } });
    expect((await call<{ databases: unknown[] }>("list", {}, meta)).databases).toHaveLength(4);
    // Its storage is full: no snapshot either.
    const [full] = (await call<{ databases: Array<{ id: string }> }>("list", {}, meta)).databases;
    await expect(call("createSnapshot", { id: full.id }, meta)).rejects.toMatchObject({
      code: 403,
      type: "QUOTA_EXCEEDED",
      data: { resource: "storageMb", limit: 2000, used: 2000 },
    });
    expect(await call("listSnapshots", {}, meta)).toEqual({ snapshots: [] });
  });

  it("dbaas branches - an account keeps at most DBAAS_SNAPSHOTS_PER_ACCOUNT (2) snapshots: 403 with resource, limit, used; deleting one makes room", async () => {
    const meta = callerMeta();
    const db = await call<Created>("create", { maxStorageMb: 10 }, meta);
    const kept = [await call<Snap>("createSnapshot", { id: db.id }, meta), await call<Snap>("createSnapshot", { id: db.id }, meta)];
    await expect(call("createSnapshot", { id: db.id }, meta)).rejects.toMatchObject({
      code: 403,
      type: "QUOTA_EXCEEDED",
      data: { resource: "snapshots", limit: 2, used: 2 },
    });
    await snapshotter().settled();
    expect((await call<{ snapshots: Snap[] }>("listSnapshots", {}, meta)).snapshots).toHaveLength(2);
    await call("deleteSnapshot", { id: kept[0].id }, meta);
    await expect(call("createSnapshot", { id: db.id }, meta)).resolves.toMatchObject({ status: "pending" });
    await snapshotter().settled();
  });

  it.each(BRANCH_STEPS.map((s) => [s]))(
    "dbaas branches - a failure after step %s leaves no role, database or record, and the snapshot whole",
    async (failing) => {
      let names: TenantNames | undefined;
      const before = await records(platform);
      const original: Provisioner = injectFaults(platform, (step, n) => {
        names = n;
        if (step === failing) throw new Error(`injected fault after ${step}`);
      });
      try {
        await expect(call("create", { fromSnapshot: snap.id })).rejects.toThrow(`injected fault after ${failing}`);
      } finally {
        dbaasApp(platform).provisioner = original;
      }
      expect(await existing(namesOf(names!))).toEqual([]);
      expect(await records(platform)).toEqual(before);
      expect((await call<Snap>("getSnapshot", { id: snap.id })).status).toBe("ready");
    },
  );

  it("dbaas branches - code in a hostile dump runs during the restore with the new role's rights only: no escalation, nothing left", async () => {
    const meta = callerMeta();
    const db = await call<Created>("create", {}, meta);
    // Harmless while its own role inserts; under any other session it tries to become superuser
    // (RESET ROLE would work if the restore ran as a superuser that SET ROLE to the tenant).
    await withClient(db.connectionString, (c) =>
      c.query(`CREATE FUNCTION escalate(n int) RETURNS boolean LANGUAGE plpgsql AS $$
                 BEGIN
                   IF current_user = '${db.username}' THEN RETURN true; END IF;
                   EXECUTE 'RESET ROLE';
                   EXECUTE format('ALTER ROLE %I SUPERUSER', '${db.username}');
                   RETURN true;
                 END $$;
               CREATE TABLE trap (n int CHECK (escalate(n)));
               INSERT INTO trap VALUES (1)`),
    );
    const hostile = await call<Snap>("createSnapshot", { id: db.id }, meta);
    await snapshotter().settled();
    const before = await records(platform);
    await expect(call("create", { fromSnapshot: hostile.id }, meta)).rejects.toThrow(/pg_restore failed.*must be superuser/s);
    expect(await records(platform)).toEqual(before);
    const superusers = await asAdmin(async (c) => (await c.query("SELECT rolname FROM pg_roles WHERE rolsuper AND rolname LIKE 'user\\_%'")).rows);
    expect(superusers).toEqual([]);
  });

  it("dbaas branches - a dump pg_restore cannot finish leaves nothing (the restore is one transaction, then compensated)", async () => {
    const meta = callerMeta();
    const db = await call<Created>("create", {}, meta);
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 20000) g"));
    const broken = await call<Snap>("createSnapshot", { id: db.id }, meta);
    await snapshotter().settled();
    const file = path.join(platform.env.DBAAS_SNAPSHOT_DIR!, `${broken.id}.dump`);
    const whole = await fs.readFile(file);
    await fs.writeFile(file, whole.subarray(0, Math.floor(whole.length * 0.7)));
    const before = await records(platform);
    await expect(call("create", { fromSnapshot: broken.id }, meta)).rejects.toThrow(/pg_restore failed/);
    expect(await records(platform)).toEqual(before);
    const leftovers = await asAdmin(
      async (c) =>
        (await c.query("SELECT datname FROM pg_database WHERE datname LIKE $1", [`client_${meta.caller.clientId.replace(/-/g, "").slice(0, 8)}_%`])).rows,
    );
    expect(leftovers).toEqual([{ datname: db.databaseName }]);
  });
});
