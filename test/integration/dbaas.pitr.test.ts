/**
 * Point-in-time restore against the real tenant cluster, whose WAL is archived by its
 * archive_command (.ci/setup.d/30-tenant-postgres.sh): insert, note the second, drop the table,
 * restore to the noted second (the row is there, the drop and later writes are not), also after the
 * source was destroyed; the restore window on the detail; timestamps outside it 422; bad
 * timestamps 400; another account's database 404.
 */
import { chmod, mkdtemp, rm } from "fs/promises";
import { tmpdir } from "os";
import path from "path";
import { randomUUID } from "crypto";
import { TestPlatform, waitFor } from "../support/platform";
import { callerMeta, psql, startDbaasPlatform, stopDbaasPlatform } from "./dbaas.helpers";

const WAL_DIR = process.env.TENANT_PG_WAL_ARCHIVE ?? "/var/lib/postgresql/pitr/tenant/wal";
type Created = { id: string; connectionString: string; databaseName: string };
type Detail = { createdAt: string; restoreWindow?: { earliest: string; latest: string } };

describe("dbaas point-in-time restore", () => {
  let platform: TestPlatform;
  let pitrDir: string;
  const owner = callerMeta();
  const create = (body: object, meta = owner) => platform.broker.call<Created, object>("dbaas.create", body, { meta });
  const sql = (url: string, ...commands: string[]) => {
    const run = psql(url, ...commands);
    expect(run.stderr).toBe("");
    return run.stdout.trim();
  };

  beforeAll(async () => {
    pitrDir = await mkdtemp(path.join(tmpdir(), "ci-platform-test-pitr-"));
    await chmod(pitrDir, 0o711);
    platform = await startDbaasPlatform({ env: { DBAAS_PITR_WAL_DIR: WAL_DIR, DBAAS_PITR_DIR: pitrDir } });
    await platform.broker.call("dbaas.baseBackup");
  });

  it("dbaas pitr - the archiver's health is a figure of dbaas.stats (the metric platform_databases_wal_archive)", async () => {
    const stats = await platform.broker.call<{ walArchive?: Record<string, number> }>("dbaas.stats");
    expect(stats.walArchive).toMatchObject({ failing: 0, secondsSinceArchived: expect.any(Number) });
  });
  afterAll(async () => {
    await stopDbaasPlatform(platform);
    await rm(pitrDir, { recursive: true, force: true });
  });

  it("dbaas pitr - restores to the noted second: the row is there, the drop and later writes are not; also after the source is destroyed", async () => {
    const source = await create({});
    const detail = await platform.broker.call<Detail, object>("dbaas.get", { id: source.id }, { meta: owner });
    expect(detail.restoreWindow?.earliest).toBe(detail.createdAt);
    sql(source.connectionString, "CREATE TABLE t (note text)", "INSERT INTO t VALUES ('kept')");
    // The second after the insert committed: everything before it is in, nothing after it.
    const noted = new Date(Math.ceil((Date.now() + 1) / 1000) * 1000);
    await waitFor(() => Date.now() > noted.getTime() + 20, { message: "the next second" });
    sql(source.connectionString, "DROP TABLE t", "CREATE TABLE later (n int)");
    const timestamp = noted.toISOString().replace(".000Z", "Z");

    const restored = await create({ restoreFrom: { databaseId: source.id, timestamp } });
    expect(sql(restored.connectionString, "SELECT note FROM t")).toBe("kept");
    expect(psql(restored.connectionString, "SELECT * FROM later").stderr).toMatch(/does not exist/);
    expect(restored.databaseName).not.toBe(source.databaseName);

    await platform.broker.call("dbaas.destroy", { id: source.id }, { meta: owner });
    const again = await create({ restoreFrom: { databaseId: source.id, timestamp } });
    expect(sql(again.connectionString, "SELECT note FROM t")).toBe("kept");
    // Outside the destroyed database's life: 422 with the window.
    const late = new Date(Date.now() + 1000).toISOString();
    await expect(create({ restoreFrom: { databaseId: source.id, timestamp: late } })).rejects.toMatchObject({ code: 422, type: "OUT_OF_RESTORE_WINDOW" });
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
});
