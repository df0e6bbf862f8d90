/**
 * The CLI's database commands of issue 32 as a real child process (bin/ci-platform.js) against a
 * platform in this process whose dbaas runs on the tenant cluster with its WAL archive and pooler
 * (.ci/setup.d/30-tenant-postgres.sh, 31-tenant-pgbouncer.sh): `db restore ID --at` (waited for,
 * and --no-wait), `db extensions ID`, `db psql --pooled`. One pair of restores for the file.
 */
import { spawn } from "child_process";
import { mkdtempSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { pitrTestEnv } from "../support/pitr";
import { ROOT, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

type Run = { code: number | null; stdout: string; stderr: string };
const POOLER_PORT = process.env.TENANT_POOLER_PORT ?? "6433";

describe("clients cli - databases: restore, extensions, pooled psql", () => {
  let platform: TestPlatform;
  const work = mkdtempSync(path.join(os.tmpdir(), "cli-db-"));
  // Its own folder: the scratch postgres (the archive's owner) must be able to enter it.
  const home = path.join(work, "home");
  const config = path.join(home, ".config-xdg");

  function cli(...args: string[]): Promise<Run> {
    const env: Record<string, string | undefined> = { ...process.env, HOME: home, XDG_CONFIG_HOME: config, NO_COLOR: "1" };
    for (const name of ["CI_PLATFORM_URL", "CI_PLATFORM_API_KEY"]) delete env[name];
    const child = spawn(process.execPath, [path.join(ROOT, "bin/ci-platform.js"), ...args], { cwd: work, env, stdio: ["pipe", "pipe", "pipe"] });
    const run: Run = { code: null, stdout: "", stderr: "" };
    child.stdout.setEncoding("utf8").on("data", (d: string) => (run.stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (run.stderr += d));
    child.stdin.end(args.includes("--password-stdin") ? "correct horse battery\n" : "");
    return new Promise((resolve) => child.once("close", (code) => resolve({ ...run, code })));
  }
  const json = async (...args: string[]) => {
    const res = await cli("--json", ...args);
    if (res.code !== 0) throw new Error(`${args.join(" ")}: ${res.code} ${res.stderr}`);
    return JSON.parse(res.stdout);
  };
  const psql = async (id: string, query: string, pooled = false) => {
    const res = await cli("db", "psql", id, ...(pooled ? ["--pooled"] : []), "--", "-Atc", query);
    expect([res.code, res.stderr]).toEqual([0, ""]);
    return res.stdout.trim();
  };

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "dbaas"],
      env: { ...pitrTestEnv(), DBAAS_POOLED_PORT: POOLER_PORT, DBAAS_RECONCILE_S: "3600", DBAAS_QUOTA_CHECK_S: "3600" },
    });
    await waitForRoute(platform.baseUrl, "GET", "/api/databases");
    const reg = await cli("register", "--url", platform.baseUrl, "--email", `${uniqueName("clidb")}@example.com`, "--name", "CLI", "--password-stdin");
    expect(reg.code).toBe(0);
    await platform.broker.call("dbaas.baseBackup");
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("clients cli - db restore --at waits for the restore (progress on stderr) and keeps the new password; --no-wait answers restoring", async () => {
    const source = await json("db", "create");
    await psql(source.id, "CREATE TABLE t (note text); INSERT INTO t VALUES ('kept')");
    const noted = new Date(Math.ceil((Date.now() + 1) / 1000) * 1000);
    await waitFor(() => Date.now() > noted.getTime() + 20, { message: "the next second" });
    await psql(source.id, "DROP TABLE t");
    const at = noted.toISOString();

    const started = await json("db", "restore", source.id, "--at", at, "--no-wait");
    expect(started).toMatchObject({ status: "restoring", password: expect.any(String), connectionString: expect.any(String) });
    const waited = await cli("db", "restore", source.id, "--at", at);
    expect([waited.code, waited.stderr]).toEqual([0, expect.stringMatching(/active\n$/)]);
    expect(waited.stderr).toMatch(new RegExp(`restoring ${source.id} as of ${at} into [0-9a-f-]{36}…\\n[\\s\\S]*database [0-9a-f-]{36} active\\n$`));
    const restoredId = /database ([0-9a-f-]{36}) active/.exec(waited.stderr)![1];
    expect(await psql(restoredId, "SELECT note FROM t")).toBe("kept");
    // The --no-wait one ends active too, and its kept password works.
    await waitFor(async () => (await json("db", "get", started.id)).status === "active", { timeoutMs: 120_000, intervalMs: 500, message: "the restore" });
    expect(await psql(started.id, "SELECT note FROM t")).toBe("kept");
    expect((await json("db", "ls")).map((d: { status: string }) => d.status)).toEqual(["active", "active", "active"]);
  }, 240_000); // two restores (the machine's CPUs are shared)

  test("clients cli - db restore refuses bad timestamps, times outside the window and unknown databases, with the platform's message", async () => {
    const source = await json("db", "create");
    const cases: Array<[string, string, RegExp]> = [
      [source.id, "yesterday", /VALIDATION_FAILED|ISO 8601/],
      [source.id, new Date(Date.now() + 3_600_000).toISOString(), /within|restore window/],
      ["6f1d3c52-0000-4000-8000-000000000000", new Date().toISOString(), /not found/i],
    ];
    for (const [id, at, message] of cases) {
      const res = await cli("db", "restore", id, "--at", at);
      expect([res.code, res.stderr]).toEqual([1, expect.stringMatching(message)]);
    }
    const missing = await cli("db", "restore", source.id);
    expect([missing.code, missing.stderr]).toEqual([expect.any(Number), expect.stringMatching(/at/)]);
    expect(missing.code).not.toBe(0);
    expect((await json("db", "ls")).length).toBe(4); // nothing was made
  });

  test("clients cli - db extensions lists available and installed; db psql --pooled goes through the pooler", async () => {
    const db = await json("db", "create");
    expect(db.pooledConnectionString).toMatch(new RegExp(`:${POOLER_PORT}/`));
    const stored = JSON.parse(readFileSync(path.join(config, "ci-platform", "config.json"), "utf8"));
    expect(stored.pooledDatabases[db.id]).toBe(db.pooledConnectionString);
    const before = await json("db", "extensions", db.id);
    expect(before.available).toContain("pg_trgm");
    expect(before.installed).toEqual([]);
    await psql(db.id, "CREATE EXTENSION pg_trgm", true);
    expect(await psql(db.id, "SELECT similarity('word', 'words') > 0", true)).toBe("t");
    expect((await json("db", "extensions", db.id)).installed).toEqual(["pg_trgm"]);
    const table = await cli("db", "extensions", db.id);
    expect(table.stdout).toMatch(/pg_trgm\W+yes\W+yes/);
    // psql's PORT: where it connected (the server behind the pooler answers its own port to SQL).
    expect(await psql(db.id, "\\echo :PORT", true)).toBe(POOLER_PORT);
    expect(await psql(db.id, "SELECT current_user", true)).toBe(db.username);
    const notStored = await cli("db", "psql", "6f1d3c52-0000-4000-8000-000000000000", "--pooled");
    expect([notStored.code, notStored.stderr]).toEqual([2, expect.stringContaining("No stored password")]);
  });
});
