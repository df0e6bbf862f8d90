/**
 * Point-in-time restore against the real tenant cluster, whose WAL is archived by its
 * archive_command (.ci/setup.d/30-tenant-postgres.sh): insert, note the second, drop the table,
 * restore to the noted second (the row is there, the drop and later writes are not), also after the
 * source was destroyed; the restore window on the detail; timestamps outside it 422; bad
 * timestamps 400; another account's database 404. Restores run in the background: answered at once
 * `restoring`, then `active`; one that fails, or whose process died, ends `failed` with a reason and
 * nothing left on the server.
 */
import { randomUUID } from "crypto";
import { existsSync } from "fs";
import { mkdir } from "fs/promises";
import path from "path";
import { pitrTestEnv } from "../support/pitr";
import { TestPlatform, waitFor } from "../support/platform";
import { callerMeta, dbaasApp, existing, psql, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";
import { INTERRUPTED_REASON, restoreFailureReason } from "../../services/dbaas/pitr-jobs";

type Created = { id: string; connectionString: string; databaseName: string; username: string; status?: string };
type Detail = { createdAt: string; status: string; statusReason?: string; restoreWindow?: { earliest: string; latest: string } };

describe("dbaas point-in-time restore", () => {
  let platform: TestPlatform;
  const owner = callerMeta();
  const create = (body: object, meta = owner) => platform.broker.call<Created, object>("dbaas.create", body, { meta });
  const detailOf = (id: string, meta = owner) => platform.broker.call<Detail, object>("dbaas.get", { id }, { meta });
  /** Waits until the restore is no longer `restoring`; returns its detail. */
  const settled = (id: string) =>
    waitFor(async () => ((await detailOf(id)).status !== "restoring" ? detailOf(id) : undefined), {
      timeoutMs: 120_000,
      intervalMs: 200,
      message: "the restore",
    });
  const sql = (url: string, ...commands: string[]) => {
    const run = psql(url, ...commands);
    expect(run.stderr).toBe("");
    return run.stdout.trim();
  };

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: pitrTestEnv() });
    await platform.broker.call("dbaas.baseBackup");
  }, 180_000);

  it("dbaas pitr - the archiver's health is a figure of dbaas.stats (the metric platform_databases_wal_archive)", async () => {
    const stats = await platform.broker.call<{ walArchive?: Record<string, number> }>("dbaas.stats");
    expect(stats.walArchive).toMatchObject({ failing: 0, secondsSinceArchived: expect.any(Number) });
  });
  afterAll(async () => {
    await stopDbaasPlatform(platform);
  });

  it("dbaas pitr - restores to the noted second: the row is there, the drop and later writes are not; also after the source is destroyed", async () => {
    const source = await create({});
    const detail = await platform.broker.call<Detail, object>("dbaas.get", { id: source.id }, { meta: owner });
    expect(Date.parse(detail.restoreWindow!.earliest)).toBeGreaterThanOrEqual(Date.parse(detail.createdAt));
    sql(source.connectionString, "CREATE TABLE t (note text)", "INSERT INTO t VALUES ('kept')");
    // The second after the insert committed: everything before it is in, nothing after it.
    const noted = new Date(Math.ceil((Date.now() + 1) / 1000) * 1000);
    await waitFor(() => Date.now() > noted.getTime() + 20, { message: "the next second" });
    sql(source.connectionString, "DROP TABLE t", "CREATE TABLE later (n int)");
    const timestamp = noted.toISOString().replace(".000Z", "Z");

    const meta: { $statusCode?: number; $responseHeaders?: Record<string, string> } & typeof owner = { ...owner };
    const restored = await create({ restoreFrom: { databaseId: source.id, timestamp } }, meta);
    // Answered at once: 202, the new database restoring (listed, not yet usable by the routes).
    expect(restored.status).toBe("restoring");
    expect(meta.$statusCode).toBe(202);
    expect(meta.$responseHeaders?.Location).toBe(`/api/databases/${restored.id}`);
    expect(await detailOf(restored.id)).toMatchObject({ status: "restoring", storageMb: 0 });
    const listed = await platform.broker.call<{ databases: Detail[] }, object>("dbaas.list", {}, { meta: owner });
    expect(listed.databases.map((d) => d.status)).toContain("restoring");
    await expect(platform.broker.call("dbaas.rotatePassword", { id: restored.id }, { meta: owner })).rejects.toMatchObject({
      code: 409,
      type: "INVALID_STATE",
    });
    await expect(platform.broker.call("dbaas.destroy", { id: restored.id }, { meta: owner })).rejects.toMatchObject({ code: 409, type: "INVALID_STATE" });
    expect(await settled(restored.id)).toMatchObject({ status: "active", restoreWindow: expect.any(Object) });
    expect(sql(restored.connectionString, "SELECT note FROM t")).toBe("kept");
    expect(psql(restored.connectionString, "SELECT * FROM later").stderr).toMatch(/does not exist/);
    expect(restored.databaseName).not.toBe(source.databaseName);

    await platform.broker.call("dbaas.destroy", { id: source.id }, { meta: owner });
    const again = await create({ restoreFrom: { databaseId: source.id, timestamp } });
    // A client writing into a database still restoring: the restore cannot load the same table, and fails.
    sql(again.connectionString, "CREATE TABLE t (mine int)");
    const failed = await settled(again.id);
    expect(failed).toMatchObject({ status: "failed", statusReason: expect.stringMatching(/could not be loaded: .*"t" already exists/) });
    expect(await existing({ databases: [again.databaseName], roles: [again.username] })).toEqual([]);
    await expect(platform.broker.call("dbaas.rotatePassword", { id: again.id }, { meta: owner })).rejects.toMatchObject({ code: 409 });
    await expect(platform.broker.call("dbaas.get", { id: again.id }, { meta: callerMeta() })).rejects.toMatchObject({ code: 404 });
    await expect(platform.broker.call("dbaas.destroy", { id: again.id }, { meta: owner })).resolves.toEqual({
      message: `Database ${again.databaseName} destroyed`,
    });
    await expect(detailOf(again.id)).rejects.toMatchObject({ code: 404 });

    const third = await create({ restoreFrom: { databaseId: source.id, timestamp } });
    expect(await settled(third.id)).toMatchObject({ status: "active" });
    expect(sql(third.connectionString, "SELECT note FROM t")).toBe("kept");
    // Outside the destroyed database's life: 422 with the window.
    const late = new Date(Date.now() + 1000).toISOString();
    await expect(create({ restoreFrom: { databaseId: source.id, timestamp: late } })).rejects.toMatchObject({ code: 422, type: "OUT_OF_RESTORE_WINDOW" });
  });

  it("dbaas pitr - the window starts when the database was there: a restore to its earliest instant holds the database as created", async () => {
    const source = await create({});
    const { createdAt, restoreWindow } = await detailOf(source.id);
    expect(Date.parse(restoreWindow!.earliest)).toBeGreaterThanOrEqual(Date.parse(createdAt));
    sql(source.connectionString, "CREATE TABLE later (n int)");
    const restored = await create({ restoreFrom: { databaseId: source.id, timestamp: restoreWindow!.earliest } });
    expect(await settled(restored.id)).toMatchObject({ status: "active" });
    expect(sql(restored.connectionString, "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'public'")).toBe("0");
    for (const id of [restored.id, source.id]) await platform.broker.call("dbaas.destroy", { id }, { meta: owner });
  });

  it("dbaas pitr - outside the window 422, bad timestamps 400, another account's or an unknown database 404, nothing created", async () => {
    const source = await create({});
    const before = new Date(
      Date.parse(source.databaseName ? (await platform.broker.call<Detail, object>("dbaas.get", { id: source.id }, { meta: owner })).createdAt : "") -
        3_600_000,
    );
    const cases: Array<[object, number, string]> = [
      [{ restoreFrom: { databaseId: source.id, timestamp: before.toISOString() } }, 422, "OUT_OF_RESTORE_WINDOW"],
      [{ restoreFrom: { databaseId: source.id, timestamp: new Date(Date.now() + 3_600_000).toISOString() } }, 422, "OUT_OF_RESTORE_WINDOW"],
      [{ restoreFrom: { databaseId: source.id, timestamp: "yesterday" } }, 400, "VALIDATION_FAILED"],
      [{ restoreFrom: { databaseId: source.id, timestamp: "2026-11-27 15:00:00" } }, 400, "VALIDATION_FAILED"],
      [{ restoreFrom: { databaseId: source.id, timestamp: "2026-02-30T10:00:00Z" } }, 400, "VALIDATION_FAILED"],
      // The action's parameter rules (the gateway answers them 400 VALIDATION_FAILED, test/e2e).
      [{ restoreFrom: { databaseId: source.id } }, 422, "VALIDATION_ERROR"],
      [{ restoreFrom: { databaseId: source.id, timestamp: new Date().toISOString(), extra: 1 } }, 422, "VALIDATION_ERROR"],
      [{ restoreFrom: { databaseId: source.id, timestamp: new Date().toISOString() }, fromSnapshot: randomUUID() }, 400, "VALIDATION_FAILED"],
      [{ restoreFrom: { databaseId: randomUUID(), timestamp: new Date().toISOString() } }, 404, "NOT_FOUND"],
      [{ restoreFrom: { databaseId: "not-a-uuid", timestamp: new Date().toISOString() } }, 404, "NOT_FOUND"],
    ];
    for (const [body, code, type] of cases) await expect(create(body)).rejects.toMatchObject({ code, type });
    const stranger = callerMeta();
    await expect(create({ restoreFrom: { databaseId: source.id, timestamp: new Date().toISOString() } }, stranger)).rejects.toMatchObject({
      code: 404,
      type: "NOT_FOUND",
    });
    const listed = await platform.broker.call<{ databases: unknown[] }, object>("dbaas.list", {}, { meta: stranger });
    expect(listed.databases).toEqual([]);
  });

  it("dbaas pitr - a restore whose process died ends failed with the reason at the next pass, its database and role dropped", async () => {
    const app = dbaasApp(platform);
    const clientId = owner.caller.clientId;
    let release: () => void = () => undefined;
    const hanging = new Promise<void>((resolve) => (release = resolve));
    // A restore in flight (its filler never ends on its own), then its process "dies": its lease is no longer held.
    const { row, filled } = await app.provisioner.provision(clientId, {
      restore: () => hanging,
      background: { restoreOf: randomUUID(), restoreTo: new Date(), reasonOf: restoreFailureReason },
    });
    expect((await detailOf(row.id)).status).toBe("restoring");
    await withClient(platform.databaseUrl, (c) => c.query("UPDATE dbaas.databases SET owner = gen_random_uuid() WHERE id = $1", [row.id]));
    await platform.broker.call("dbaas.reconcile", { graceS: 3600 });
    expect(await detailOf(row.id)).toMatchObject({ status: "failed", statusReason: INTERRUPTED_REASON });
    expect(await existing({ databases: [row.database_name], roles: [row.username] })).toEqual([]);
    release();
    await filled;
    expect((await detailOf(row.id)).status).toBe("failed"); // the filler ending late changes nothing
    await platform.broker.call("dbaas.destroy", { id: row.id }, { meta: owner });
  });

  it("dbaas pitr - a dead process's leftovers in the folder the replicas share go only while no replica backs up or restores", async () => {
    const app = dbaasApp(platform);
    const root = pitrTestEnv().DBAAS_PITR_DIR;
    const scratch = path.join(root, `scratch-${randomUUID()}`);
    const partial = path.join(root, "base", `${randomUUID()}.partial`);
    await mkdir(path.join(scratch, "data"), { recursive: true });
    await mkdir(partial);
    // A dump or restore in flight on some replica (this one's slot, taken as every restore takes it):
    // the scratch folder may be its own, and stays; the half-taken backup goes (none is being taken).
    const removed = await app.tenant.withDumpSlot(() => app.pitr!.removeLeftovers());
    expect(removed).toBe(false);
    expect(existsSync(scratch)).toBe(true);
    expect(existsSync(partial)).toBe(false);
    // Once no dump or restore runs anywhere (other test files restore on the same server: waited for).
    await waitFor(() => app.pitr!.removeLeftovers(), { timeoutMs: 120_000, intervalMs: 200, message: "no dump or restore on the tenant server" });
    expect(existsSync(scratch)).toBe(false);
  });

  it("dbaas pitr - the reason a restore failed names the account's own SQL error, and nothing of the platform's", () => {
    const pgRestore = new Error(
      '/usr/lib/postgresql/15/bin/pg_restore failed (exit 1): pg_restore: error: could not execute query: ERROR:  relation "t" already exists',
    );
    expect(restoreFailureReason(pgRestore)).toBe('The restored data could not be loaded: relation "t" already exists');
    expect(restoreFailureReason(new Error("ENOENT /var/lib/postgresql/pitr/base/x"))).not.toMatch(/var\/lib/);
  });
});
