/**
 * Attacks on client databases (dbaas), replayed against the real servers: the trust-auth main
 * PostgreSQL (5432), the scram tenant cluster (5433), NATS for the crash case, and psql as the
 * tenant's client. Each `it` names the attack it defends against.
 */
import { spawnSync } from "child_process";
import { ServiceBroker } from "moleculer";
import type { NatsPlatform } from "../support/nats-platform";
import { Client } from "pg";
import type { DatabaseCreated } from "../../services/dbaas/dbaas.service";
import type { QuotaReport } from "../../services/dbaas/quota";
import { hiddenAt, NAME_FUNCTIONS, NAME_RELATIONS, SESSION_FUNCTIONS, SESSION_RELATIONS } from "../../services/dbaas/tenant-sql";
import type { CatalogLevel } from "../../services/dbaas/settings";
import {
  ADMIN_PG_URL,
  dropDatabase,
  spawnServices,
  startTestPlatform,
  TENANT_ADMIN_URL,
  TestPlatform,
  testDatabaseUrl,
  uniqueName,
  waitFor,
} from "../support/platform";
import {
  accountRecords,
  asAdmin,
  callerMeta,
  connectRefusal,
  databaseBytes,
  existing,
  killMidProvision,
  markerOf,
  psql,
  refusal,
  spawnDbaasBeside,
  startDbaasNatsPlatform,
  startDbaasPlatform,
  stopDbaasPlatform,
  tenantEnv,
  withClient,
} from "../integration/dbaas.helpers";

const MIB = 1048576;
const fill = (rows: number) => `INSERT INTO big (payload) SELECT md5(random()::text) || repeat('x', 968) FROM generate_series(1, ${rows})`;
const create = (platform: TestPlatform, meta = callerMeta()) => platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta });

/**
 * Runs `work` on a second dbaas started beside `platform` (its state database, its settings)
 * with `env` changed: settings are parsed once at start, so another value is another process.
 */
async function besideWith<T>(platform: TestPlatform, env: Record<string, string | undefined>, work: (other: TestPlatform) => Promise<T>): Promise<T> {
  const other = await startTestPlatform({ services: ["dbaas"], databaseUrl: platform.databaseUrl, dropDatabase: false, env: { ...platform.env, ...env } });
  try {
    return await work(other);
  } finally {
    await other.stop(); // not stopDbaasPlatform: the roles it made belong to `platform`'s marker
  }
}

/** Starts dbaas alone in a child process and resolves with its exit code and output once it exits. */
async function startExpectingExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawnServices(["dbaas"], { TRANSPORTER: "", HEALTH_PORT: "off", METRICS_PORT: "off", ...env });
  const exited = () => child.proc.exitCode !== null || child.proc.signalCode !== null;
  // Still running at the deadline: it did not refuse to start (code null), and is stopped.
  const stillRunning = await waitFor(exited, { timeoutMs: 45_000, message: "dbaas to exit" }).then(
    () => false,
    () => true,
  );
  if (stillRunning) await child.stop("SIGKILL");
  return { code: stillRunning ? null : child.proc.exitCode, output: child.output() };
}

describe("databases - where client databases may live", () => {
  it("dbaas - a tenant server that lets a wrong password in (trust auth) is refused: the process exits non-zero", async () => {
    const databaseUrl = testDatabaseUrl();
    try {
      const run = await startExpectingExit({ DATABASE_URL: databaseUrl, DBAAS_ADMIN_URL: ADMIN_PG_URL });
      expect(run.code).not.toBe(0);
      expect(run.code).not.toBeNull();
      expect(run.output).toMatch(/refuses to start.*accepted a login with a wrong password/);
      // The throw-away probe role is gone again.
      const probes = await withClient(ADMIN_PG_URL, (c) => c.query("SELECT 1 FROM pg_roles WHERE rolname ~ '^ci_probe_' AND rolvaliduntil > now()"));
      expect(probes.rows).toEqual([]);
    } finally {
      await dropDatabase(databaseUrl);
    }
  });

  it("dbaas - with DBAAS_ADMIN_URL unset, client databases do not fall back to the state server: the process exits non-zero", async () => {
    const databaseUrl = testDatabaseUrl();
    try {
      const run = await startExpectingExit({ DATABASE_URL: databaseUrl, DBAAS_ADMIN_URL: "" });
      expect(run.code).not.toBe(0);
      expect(run.output).toMatch(/DBAAS_ADMIN_URL is not set/);
    } finally {
      await dropDatabase(databaseUrl);
    }
  });

  it("dbaas - the platform's own state server is refused as the tenant server unless the operator opts in", async () => {
    const stateUrl = new URL(TENANT_ADMIN_URL);
    stateUrl.pathname = `/${uniqueName("ci_test")}`;
    try {
      const run = await startExpectingExit({ DATABASE_URL: stateUrl.toString(), DBAAS_ADMIN_URL: TENANT_ADMIN_URL });
      expect(run.code).not.toBe(0);
      expect(run.output).toMatch(/refuses to start.*state server/);
      // Opted in, on a server that checks passwords: it starts and provisions.
      const platform = await startTestPlatform({
        services: ["dbaas"],
        databaseUrl: stateUrl.toString(),
        dropDatabase: false,
        env: tenantEnv({ DBAAS_ALLOW_STATE_SERVER: "true" }),
      });
      try {
        const db = await create(platform);
        await withClient(db.connectionString, (c) => c.query("SELECT 1"));
        // A tenant of that server cannot reach the platform's state on it.
        expect(await connectRefusal(`postgresql://${db.username}:${db.password}@${db.host}:${db.port}${stateUrl.pathname}`)).toBe("42501");
      } finally {
        await stopDbaasPlatform(platform);
      }
    } finally {
      await asAdmin((c) => c.query(`DROP DATABASE IF EXISTS "${stateUrl.pathname.slice(1)}" WITH (FORCE)`));
    }
  });

  it("dbaas - another role on the state server cannot connect to the platform's database (CONNECT revoked from PUBLIC)", async () => {
    const platform = await startDbaasPlatform();
    const role = uniqueName("intruder");
    try {
      const stateDb = new URL(platform.databaseUrl).pathname.slice(1);
      await withClient(ADMIN_PG_URL, (c) => c.query(`CREATE ROLE ${role} LOGIN`));
      const url = new URL(platform.databaseUrl);
      url.username = role;
      expect(await connectRefusal(url.toString())).toBe("42501");
      const open = await withClient(ADMIN_PG_URL, (c) => c.query("SELECT has_database_privilege('public', $1, 'CONNECT') AS ok", [stateDb]));
      expect(open.rows[0].ok).toBe(false);
    } finally {
      await stopDbaasPlatform(platform);
      await withClient(ADMIN_PG_URL, (c) => c.query(`DROP ROLE IF EXISTS ${role}`));
    }
  });
});

describe("databases - read-only over quota cannot be escaped", () => {
  const QUOTA_MB = 20;
  let platform: TestPlatform;
  let db: DatabaseCreated;
  let other: DatabaseCreated;
  const meta = callerMeta();

  beforeAll(async () => {
    // Measured every 0.2 s once near the quota; the full round never comes during the test.
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_STORAGE_MB: String(QUOTA_MB), DBAAS_QUOTA_NEAR_CHECK_S: "0.2" } });
    [db, other] = await Promise.all([create(platform, meta), create(platform)]);
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas - grants to PUBLIC and other roles (tables, columns, views, sequences, schemas, SECURITY DEFINER, large objects) prepared before the quota give no write after the freeze", async () => {
    await withClient(db.connectionString, async (c) => {
      // Temporary files (outside the database's size) are capped at the quota, and the tenant cannot lift that.
      expect((await c.query("SHOW temp_file_limit")).rows[0].temp_file_limit).toBe(`${QUOTA_MB}MB`);
      expect(await refusal(c, "SET temp_file_limit = -1")).toBe("42501");
      await c.query("CREATE TABLE big (id serial PRIMARY KEY, payload text NOT NULL)");
      await c.query(`GRANT ALL ON big TO PUBLIC; GRANT ALL ON big TO ${other.username} WITH GRANT OPTION; GRANT ALL ON SEQUENCE big_id_seq TO PUBLIC`);
      await c.query("CREATE TABLE cols (a int, b text); GRANT INSERT (a, b), UPDATE (b) ON cols TO PUBLIC");
      await c.query("CREATE VIEW v AS SELECT id, payload FROM big; GRANT ALL ON v TO PUBLIC");
      await c.query("CREATE SCHEMA s2; GRANT ALL ON SCHEMA s2 TO PUBLIC; GRANT ALL ON SCHEMA public TO PUBLIC");
      await c.query(`CREATE FUNCTION s2.w(n int) RETURNS void LANGUAGE sql SECURITY DEFINER AS $$ INSERT INTO public.big (payload) SELECT repeat('y', 1000) FROM generate_series(1, n) $$;
                     GRANT EXECUTE ON FUNCTION s2.w(int) TO PUBLIC`);
      await c.query("SELECT lo_create(4242); GRANT UPDATE ON LARGE OBJECT 4242 TO PUBLIC");
      await c.query("ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC; ALTER DEFAULT PRIVILEGES GRANT ALL ON SCHEMAS TO PUBLIC");
      await c.query(fill(8800)); // past 80 % of the quota: watched closely from the next check on
    });
    const first = await platform.broker.call<QuotaReport>("dbaas.checkQuota");
    expect(first).toMatchObject({ frozen: [], near: [db.id] });

    // Past the quota: frozen by the close watch alone, within about a second.
    // (The close watch may end this very session once the size crosses the quota mid-statement.)
    await withClient(db.connectionString, (c) => c.query(fill(3500))).catch(() => undefined);
    await waitFor(async () => (await platform.broker.call<{ readOnly: boolean }, object>("dbaas.get", { id: db.id }, { meta })).readOnly, {
      timeoutMs: 5000,
      message: "the close watch to freeze the database",
    });
    const frozenBytes = await databaseBytes(db.databaseName);

    await withClient(db.connectionString, async (c) => {
      await c.query("SET default_transaction_read_only = off");
      const attempts = {
        tableGrantedToPublic: await refusal(c, "INSERT INTO big (payload) VALUES ('escape')"),
        columnGrant: await refusal(c, "INSERT INTO cols (a, b) VALUES (1, 'escape')"),
        viewGrant: await refusal(c, "INSERT INTO v (payload) SELECT repeat('z', 1000) FROM generate_series(1, 1000)"),
        schemaGrant: await refusal(c, "CREATE TABLE s2.big AS SELECT repeat('z', 1000) AS payload FROM generate_series(1, 100000)"),
        publicSchema: await refusal(c, "CREATE TABLE public.more (x int)"),
        securityDefiner: await refusal(c, "SELECT s2.w(10000)"),
        largeObject: await refusal(c, "SELECT lo_put(4242, 0, decode(repeat('00', 100000), 'hex'))"),
        newLargeObject: await refusal(c, "SELECT lo_from_bytea(0, 'x')"),
        sequence: await refusal(c, "SELECT nextval('big_id_seq')"),
        temporaryTable: await refusal(c, "CREATE TEMP TABLE t AS SELECT 1"),
      };
      for (const [path, code] of Object.entries(attempts)) expect([path, code]).toEqual([path, "42501"]);
      // Granting the rights again grants nothing: it owns nothing any more.
      await c.query("GRANT CREATE ON SCHEMA s2 TO PUBLIC; GRANT INSERT ON big TO PUBLIC");
      expect(await refusal(c, "CREATE TABLE s2.again (x int)")).toBe("42501");
      expect(await refusal(c, "INSERT INTO big (payload) VALUES ('again')")).toBe("42501");
      // Reads still work.
      expect((await c.query("SELECT count(*)::int AS n FROM v")).rows[0].n).toBeGreaterThanOrEqual(8800);
    });
    // The real client: psql fails the same way.
    const viaPsql = psql(db.connectionString, "INSERT INTO big (payload) VALUES ('psql')");
    expect(viaPsql.status).not.toBe(0);
    expect(viaPsql.stderr).toMatch(/permission denied/);
    // The other tenant's role keeps nothing it was given.
    const granted = await asAdmin(
      (c) => c.query("SELECT has_table_privilege($1, 'public.big', 'INSERT') AS insert, has_schema_privilege($1, 's2', 'CREATE') AS create", [other.username]),
      db.databaseName,
    );
    expect(granted.rows[0]).toEqual({ insert: false, create: false });
    expect(await databaseBytes(db.databaseName)).toBeLessThan(frozenBytes + MIB);
    expect(frozenBytes).toBeLessThan((QUOTA_MB + 8) * MIB); // crossing it overshot by one fill, not by a multiple
  });
});

describe("databases - one account's connections are capped across its databases", () => {
  let platform: TestPlatform;
  const meta = callerMeta();
  const open: Client[] = [];

  /** Opens connections to `db` until the server refuses one; returns how many it accepted and why it stopped. */
  async function flood(db: DatabaseCreated, max = 12): Promise<{ opened: number; refusedWith?: string }> {
    for (let opened = 0; opened < max; opened++) {
      const client = new Client({ connectionString: db.connectionString });
      client.on("error", () => undefined);
      try {
        await client.connect();
      } catch (err) {
        return { opened, refusedWith: (err as { code?: string }).code };
      }
      open.push(client);
    }
    return { opened: max };
  }
  const closeAll = async () => Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_CONNECTIONS_PER_ACCOUNT: "6", DBAAS_MAX_PER_ACCOUNT: "5" } });
  });
  afterEach(closeAll);
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas - a connection flood across 5 databases of one account stops at the account's limit, not 5 × the per-database limit", async () => {
    const dbs: DatabaseCreated[] = [];
    for (let i = 0; i < 5; i++) dbs.push(await create(platform, meta)); // in order: the split favours the oldest
    const floods = [];
    for (const db of dbs) floods.push(await flood(db));
    expect(floods.map((f) => f.opened)).toEqual([2, 1, 1, 1, 1]);
    for (const f of floods) expect(f.refusedWith).toBe("53300"); // PostgreSQL's "too many connections for role"
    await closeAll();

    // Destroying three hands their share to the two left.
    for (const db of dbs.slice(0, 3)) await platform.broker.call("dbaas.destroy", { id: db.id }, { meta });
    const after = [await flood(dbs[3]), await flood(dbs[4])];
    expect(after.map((f) => f.opened)).toEqual([3, 3]);
  });

  it("dbaas - provisioning is refused (503, nothing left behind) when the server could not give a new account its connections", async () => {
    const newcomer = callerMeta();
    // A dbaas that keeps 100000 connections free: a server with no room left.
    await besideWith(platform, { DBAAS_RESERVED_CONNECTIONS: "100000" }, async (tight) => {
      const err = await create(tight, newcomer).catch((e) => e);
      expect(err).toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE" });
      expect(err.message).not.toMatch(/max_connections|127\.0\.0\.1/);
      const rows = await withClient(platform.databaseUrl, (c) => c.query("SELECT 1 FROM dbaas.databases WHERE client_id = $1", [newcomer.caller.clientId]));
      expect(rows.rows).toEqual([]);
    });
    // No role without its database: this platform's marked roles are exactly those of its active records.
    const marker = await markerOf(platform);
    const marked = await asAdmin((c) =>
      c.query("SELECT r.rolname FROM pg_roles r JOIN pg_shdescription s ON s.objoid = r.oid WHERE s.description = $1 ORDER BY 1", [marker]),
    );
    const active = await withClient(platform.databaseUrl, (c) => c.query("SELECT username AS rolname FROM dbaas.databases WHERE status = 'active' ORDER BY 1"));
    expect(marked.rows).toEqual(active.rows);
  });
});

describe("databases - a crash mid-provision does not block the account", () => {
  let platform: NatsPlatform;
  let client: ServiceBroker;

  beforeAll(async () => {
    platform = await startDbaasNatsPlatform({ local: ["auth"] }); // a broker to call dbaas from
    client = platform.local!.broker;
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas - SIGKILL of dbaas mid-provision, then an immediate create for the same account at its limit of 1 succeeds", async () => {
    const meta = callerMeta();
    const env = { DBAAS_MAX_PER_ACCOUNT: "1" };
    const first = await spawnDbaasBeside(platform, env);
    const crashed = await killMidProvision(platform, first, meta);
    expect(crashed.status).toBe("provisioning");

    const second = await spawnDbaasBeside(platform, env);
    const db = await client.call<DatabaseCreated, object>("dbaas.create", {}, { meta, nodeID: second.nodeID });
    await withClient(db.connectionString, (c) => c.query("SELECT 1"));
    // The restarted process's reconciler removed what the crash left, without waiting out a grace period.
    await waitFor(async () => (await existing({ roles: [crashed.username] })).length === 0, { message: "the crashed role to be removed" });
    expect((await accountRecords(platform, meta.caller.clientId)).map((r) => r.status)).toEqual(["active"]);
  });
});

/** Debian's pg_dump (the real client) with the tenant's own connection string: its exit code and output. */
function pgDump(connectionString: string): { status: number; stdout: string; stderr: string } {
  const run = spawnSync("/usr/bin/pg_dump", ["--no-password", `--dbname=${connectionString}`], { encoding: "utf8", timeout: 60_000 });
  return { status: run.status ?? -1, stdout: run.stdout, stderr: run.stderr };
}

/** The catalog objects of the levels' lists whose PUBLIC right (SELECT, EXECUTE) is revoked in `databaseName`, sorted. */
async function revokedIn(databaseName: string): Promise<string[]> {
  const relations = [...SESSION_RELATIONS, ...NAME_RELATIONS];
  const functions = [...SESSION_FUNCTIONS, ...NAME_FUNCTIONS];
  const { rows } = await asAdmin(
    (c) =>
      c.query<{ name: string }>(
        `SELECT n AS name FROM unnest($1::text[]) n
          WHERE to_regclass('pg_catalog.' || n) IS NOT NULL AND NOT has_table_privilege('public', to_regclass('pg_catalog.' || n), 'SELECT')
         UNION ALL
         SELECT f FROM unnest($2::text[]) f
          WHERE to_regprocedure('pg_catalog.' || f) IS NOT NULL AND NOT has_function_privilege('public', to_regprocedure('pg_catalog.' || f), 'EXECUTE')`,
        [relations, functions],
      ),
    databaseName,
  );
  return rows.map((r) => r.name).sort();
}

const hiddenNames = (level: CatalogLevel) => [...hiddenAt(level).relations, ...hiddenAt(level).functions].sort();

/** What a tenant looks at to find other tenants' sessions. */
const sessionLooks = (connectionString: string) => ({
  pg_stat_activity: psql(connectionString, "SELECT usename, datname, application_name FROM pg_stat_activity"),
  pg_stat_get_activity: psql(connectionString, "SELECT usesysid, datid FROM pg_stat_get_activity(NULL)"),
  backendUser: psql(connectionString, "SELECT pg_stat_get_backend_userid(s) FROM pg_stat_get_backend_idset() s"),
  pg_stat_database: psql(connectionString, "SELECT datname, numbackends FROM pg_stat_database"),
  pg_stat_ssl: psql(connectionString, "SELECT pid FROM pg_stat_ssl"),
  pg_prepared_xacts: psql(connectionString, "SELECT gid, owner, database FROM pg_prepared_xacts"),
  pg_stat_progress_vacuum: psql(connectionString, "SELECT pid, datname FROM pg_stat_progress_vacuum"),
});

function expectDenied(looks: Record<string, { status: number; stdout: string; stderr: string }>, secrets: string[]): void {
  for (const [look, run] of Object.entries(looks)) {
    expect([look, run.status]).toEqual([look, expect.not.stringMatching(/^0$/)]);
    expect([look, run.stderr]).toEqual([look, expect.stringMatching(/permission denied/)]);
    for (const secret of secrets) expect([look, run.stdout]).toEqual([look, expect.not.stringContaining(secret)]);
  }
}

describe("databases - default catalog level (sessions): no other tenant's sessions, yet pg_dump and psql work", () => {
  let platform: TestPlatform;
  let a: DatabaseCreated;
  let b: DatabaseCreated;

  beforeAll(async () => {
    platform = await startDbaasPlatform(); // DBAAS_HIDE_CATALOG unset
    [a, b] = await Promise.all([create(platform), create(platform)]);
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas - a tenant cannot see another tenant's session (pg_stat_activity and the views and functions behind it)", async () => {
    const appName = "tenant_b_busy_with_secrets";
    await withClient(`${b.connectionString}?application_name=${appName}`, async (bSession) => {
      await bSession.query("SELECT 1"); // B is connected while A looks around
      // The admin sees B's session: it is there to be seen.
      const seen = await asAdmin((c) => c.query("SELECT 1 FROM pg_stat_activity WHERE usename = $1 AND application_name = $2", [b.username, appName]));
      expect(seen.rowCount).toBe(1);
      expectDenied(sessionLooks(a.connectionString), [b.username, b.databaseName, appName]);
    });
    expect(await revokedIn(a.databaseName)).toEqual(hiddenNames("sessions"));
  });

  it("dbaas - pg_dump of its own database with its own connection string succeeds; psql \\l, \\du and ::regrole work", async () => {
    const setup = psql(a.connectionString, "CREATE TABLE mine (id int PRIMARY KEY, note text)", "INSERT INTO mine VALUES (1, 'dumped row')");
    expect(setup.status).toBe(0);
    const dump = pgDump(a.connectionString);
    expect(dump.stderr).toBe("");
    expect(dump.status).toBe(0);
    expect(dump.stdout).toContain("CREATE TABLE public.mine");
    expect(dump.stdout).toContain("dumped row");
    const looks = psql(
      a.connectionString,
      "\\l",
      "\\du",
      `SELECT '${a.username}'::regrole`,
      "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()",
    );
    expect(looks.stderr).toBe("");
    expect(looks.status).toBe(0);
    expect(looks.stdout).toContain(a.databaseName);
    expect(looks.stdout).toContain(a.username);
    expect(looks.stdout).toContain("UTF8");
  });

  it("dbaas - the reconciler brings older databases to the configured level, hiding or opening as needed", async () => {
    const levelOf = async (id: string) =>
      withClient(platform.databaseUrl, async (c) => (await c.query("SELECT catalog_level FROM dbaas.databases WHERE id = $1", [id])).rows[0].catalog_level);
    // A dbaas started with this DBAAS_HIDE_CATALOG reconciles (the level is read at start).
    const reconcileAt = (level: string | undefined) => besideWith(platform, { DBAAS_HIDE_CATALOG: level }, (other) => other.broker.call("dbaas.reconcile", {}));
    let older: DatabaseCreated;
    try {
      older = await besideWith(platform, { DBAAS_HIDE_CATALOG: "off" }, (other) => create(other));
      // off: nothing revoked, a tenant reads pg_stat_activity.
      expect(await revokedIn(older.databaseName)).toEqual([]);
      expect(await levelOf(older.id)).toBe("off");
      expect(psql(older.connectionString, "SELECT count(*) FROM pg_stat_activity").status).toBe(0);

      await reconcileAt(undefined); // the default, sessions
      expect(await revokedIn(older.databaseName)).toEqual(hiddenNames("sessions"));
      expect(await levelOf(older.id)).toBe("sessions");
      expect(psql(older.connectionString, "SELECT count(*) FROM pg_stat_activity").stderr).toMatch(/permission denied/);
      expect(pgDump(older.connectionString).status).toBe(0);

      await reconcileAt("all");
      expect(await revokedIn(older.databaseName)).toEqual(hiddenNames("all"));
      expect(await levelOf(older.id)).toBe("all");
      expect(psql(older.connectionString, "SELECT datname FROM pg_database").stderr).toMatch(/permission denied/);
      expect(pgDump(older.connectionString).status).not.toBe(0);

      // Back to sessions (an upgrade from the former default): names readable again, pg_dump works.
      await reconcileAt("sessions");
      expect(await revokedIn(older.databaseName)).toEqual(hiddenNames("sessions"));
      expect(pgDump(older.connectionString).status).toBe(0);
      expect(psql(older.connectionString, "\\l").status).toBe(0);

      await reconcileAt("false");
      expect(await revokedIn(older.databaseName)).toEqual([]);
      expect(await levelOf(older.id)).toBe("off");
    } finally {
      await reconcileAt(undefined);
    }
    expect(await revokedIn(older.databaseName)).toEqual(hiddenNames("sessions"));
    expect(await revokedIn(a.databaseName)).toEqual(hiddenNames("sessions"));
  });

  it("dbaas - an unknown DBAAS_HIDE_CATALOG refuses to start: the process exits non-zero, naming the values", async () => {
    const databaseUrl = testDatabaseUrl();
    try {
      const run = await startExpectingExit({ DATABASE_URL: databaseUrl, DBAAS_ADMIN_URL: TENANT_ADMIN_URL, DBAAS_HIDE_CATALOG: "yes" });
      expect(run.code).not.toBe(0);
      expect(run.code).not.toBeNull();
      expect(run.output).toMatch(/DBAAS_HIDE_CATALOG must be "sessions" \(the default\), "all" \(or "true"\) or "off" \(or "false"\), got "yes"/);
    } finally {
      await dropDatabase(databaseUrl);
    }
  });
});

describe("databases - catalog level all: a tenant cannot list other tenants", () => {
  let platform: TestPlatform;
  let a: DatabaseCreated;
  let b: DatabaseCreated;

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_HIDE_CATALOG: "all" } });
    [a, b] = await Promise.all([create(platform), create(platform)]);
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas - a tenant cannot list other databases, roles or sessions (psql \\l, pg_database, pg_roles, pg_stat_activity and the functions behind them)", async () => {
    await withClient(b.connectionString, async (bSession) => {
      await bSession.query("SELECT 1"); // B is connected while A looks around
      const looks = {
        "\\l": psql(a.connectionString, "\\l"),
        "\\du": psql(a.connectionString, "\\du"),
        pg_database: psql(a.connectionString, "SELECT datname FROM pg_database"),
        pg_stat_database: psql(a.connectionString, "SELECT datname FROM pg_stat_database"),
        pg_roles: psql(a.connectionString, "SELECT rolname FROM pg_roles"),
        pg_shdescription: psql(a.connectionString, "SELECT description FROM pg_shdescription"),
        pg_stat_activity: psql(a.connectionString, "SELECT usename, datname FROM pg_stat_activity"),
        pg_stat_get_activity: psql(a.connectionString, "SELECT usesysid, datid FROM pg_stat_get_activity(NULL)"),
        backendUser: psql(a.connectionString, "SELECT pg_stat_get_backend_userid(s) FROM pg_stat_get_backend_idset() s"),
        shobj_description: psql(a.connectionString, "SELECT shobj_description(oid, 'pg_database') FROM generate_series(1, 20000) oid"),
      };
      for (const [look, run] of Object.entries(looks)) {
        expect([look, run.status]).toEqual([look, expect.not.stringMatching(/^0$/)]);
        expect([look, run.stderr]).toEqual([look, expect.stringMatching(/permission denied/)]);
        expect([look, run.stdout]).toEqual([look, expect.not.stringContaining(b.databaseName)]);
      }
    });
    // What a tenant needs keeps working: its own tables through psql.
    const own = psql(a.connectionString, "CREATE TABLE mine (x int)", "\\dt", "SELECT current_user, current_database()");
    expect(own.status).toBe(0);
    expect(own.stdout).toContain("mine");
    expect(own.stdout).toContain(`${a.username}|${a.databaseName}`);
    // The price of this level: pg_dump reads pg_roles and pg_database, and fails.
    const dump = pgDump(a.connectionString);
    expect(dump.status).not.toBe(0);
    expect(dump.stderr).toMatch(/permission denied/);
    expect(await revokedIn(a.databaseName)).toEqual(hiddenNames("all"));
  });
});
