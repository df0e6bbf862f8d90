/**
 * The pooled endpoint against the real tenant cluster behind Debian's PgBouncer
 * (.ci/setup.d/31-tenant-pgbouncer.sh, transaction mode on 6433): the pooled string works with
 * psql and pgbench, hundreds of new connections are held by a few server connections within the
 * role's share, rotation and a quota freeze hold through it, and the pooler's lookup reveals no
 * other role's secret.
 */
import { spawn } from "child_process";
import { mkdtemp, writeFile } from "fs/promises";
import { tmpdir } from "os";
import path from "path";
import { TestPlatform, waitFor } from "../support/platform";
import { asAdmin, callerMeta, psql, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";

const POOLER_PORT = Number(process.env.TENANT_POOLER_PORT ?? 6433);
type Created = { id: string; username: string; password: string; connectionString: string; pooledConnectionString: string; databaseName: string };

/** pgbench's exit status and output, bounded in time. */
function pgbench(args: string[]): Promise<{ status: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn("pgbench", args, { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C" }, timeout: 120_000 });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("close", (code) => resolve({ status: code ?? -1, out }));
  });
}

/** The role's sessions on the server now. */
const serverSessions = (username: string) =>
  asAdmin(async (c) => Number((await c.query("SELECT count(*) AS n FROM pg_stat_activity WHERE usename = $1", [username])).rows[0].n));

describe("dbaas pooled connections", () => {
  let platform: TestPlatform;
  let owner = callerMeta();
  const create = () => platform.broker.call<Created, object>("dbaas.create", {}, { meta: owner });

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_POOLED_PORT: String(POOLER_PORT), DBAAS_CONNECTIONS_PER_ACCOUNT: "4" } });
  });
  afterAll(() => stopDbaasPlatform(platform));
  beforeEach(() => (owner = callerMeta()));

  it("dbaas pooled - create, detail and rotate carry the pooled endpoint; psql works through it", async () => {
    const db = await create();
    expect(db.pooledConnectionString).toBe(db.connectionString.replace(/:\d+\//, `:${POOLER_PORT}/`));
    const detail = await platform.broker.call<Record<string, unknown>, object>("dbaas.get", { id: db.id }, { meta: owner });
    expect(detail).toMatchObject({ pooledHost: "127.0.0.1", pooledPort: POOLER_PORT });
    const run = psql(db.pooledConnectionString, "CREATE TABLE t (n int)", "INSERT INTO t VALUES (1)", "SELECT count(*) FROM t");
    expect([run.status, run.stdout.trim().split("\n").pop(), run.stderr]).toEqual([0, "1", ""]);

    const rotated = await platform.broker.call<{ password: string; pooledConnectionString: string }, object>(
      "dbaas.rotatePassword",
      { id: db.id },
      { meta: owner },
    );
    expect(rotated.pooledConnectionString).toBe(db.pooledConnectionString.replace(db.password, rotated.password));
    expect(psql(rotated.pooledConnectionString, "SELECT count(*) FROM t").stdout.trim()).toBe("1");
    const old = psql(db.pooledConnectionString, "SELECT 1");
    expect(old.status).not.toBe(0);
    expect(old.stderr).toMatch(/password authentication failed|SASL authentication failed/);
  });

  it("dbaas pooled - 400 new connections (pgbench -C) are held by a few server connections within the role's share", async () => {
    const db = await create();
    const share = await asAdmin(async (c) => (await c.query("SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", [db.username])).rows[0].rolconnlimit);
    expect(share).toBe(4);
    let peak = 0;
    let running = true;
    const watch = (async () => {
      while (running) {
        peak = Math.max(peak, await serverSessions(db.username));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    // 40 clients at once, each opening a new connection per transaction, 10 each: 400 connections.
    expect(psql(db.connectionString, "CREATE TABLE t (n int)").status).toBe(0);
    const script = path.join(await mkdtemp(path.join(tmpdir(), "pgbench-")), "one.sql");
    await writeFile(script, "SELECT count(*) FROM t;\n");
    const bench = await pgbench(["-n", "-C", "-c", "40", "-j", "2", "-t", "10", "-f", script, db.pooledConnectionString]);
    running = false;
    await watch;
    expect(bench.out).toMatch(/number of failed transactions: 0/);
    expect(bench.status).toBe(0);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(3); // the pool size, within the share of 4
  });

  it("dbaas pooled - a quota freeze holds through the pooler: reads work, writes are refused until it is lifted", async () => {
    const db = await create();
    expect(psql(db.pooledConnectionString, "CREATE TABLE big AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 3000) g").status).toBe(0);
    const frozen = await platform.broker.call<{ readOnly: boolean }, object>("dbaas.setMaxStorage", { id: db.id, maxStorageMb: 1 });
    expect(frozen.readOnly).toBe(true);
    const read = psql(db.pooledConnectionString, "SELECT count(*) FROM big");
    expect([read.stdout.trim(), read.stderr]).toEqual(["3000", ""]);
    const write = psql(db.pooledConnectionString, "INSERT INTO big VALUES (0, 'y')");
    expect([write.status, write.stderr]).toEqual([1, expect.stringMatching(/permission denied|read-only/)]);
    const thawed = await platform.broker.call<{ readOnly: boolean }, object>("dbaas.setMaxStorage", { id: db.id, maxStorageMb: 64 });
    expect(thawed.readOnly).toBe(false);
    await waitFor(() => psql(db.pooledConnectionString, "INSERT INTO big VALUES (0, 'y')").status === 0, {
      message: "writes through the pooler after the thaw",
    });
  });

  it("dbaas pooled - the pooler's lookup answers tenant roles only, and only to the pooler role", async () => {
    const db = await create();
    await withClient(db.connectionString, async (c) => {
      await expect(c.query("SELECT * FROM dbaas_guard.pooler_lookup($1)", [db.username])).rejects.toMatchObject({ code: "42501" });
    });
    await asAdmin(async (c) => {
      await c.query("SET ROLE dbaas_pooler");
      const own = await c.query("SELECT usename, passwd FROM dbaas_guard.pooler_lookup($1)", [db.username]);
      expect(own.rows[0].passwd).toMatch(/^SCRAM-SHA-256\$/);
      for (const other of ["ci_admin", "postgres", "dbaas_pooler"])
        expect((await c.query("SELECT * FROM dbaas_guard.pooler_lookup($1)", [other])).rowCount).toBe(0);
      await expect(c.query("SELECT rolpassword FROM pg_authid")).rejects.toMatchObject({ code: "42501" });
    }, db.databaseName);
    // Superusers cannot log in through the pooler at all.
    const admin = psql(`postgresql://ci_admin:ci-tenant-admin@127.0.0.1:${POOLER_PORT}/${db.databaseName}`, "SELECT 1");
    expect(admin.status).not.toBe(0);
  });
});
