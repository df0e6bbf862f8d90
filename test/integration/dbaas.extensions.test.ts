/**
 * Extensions against the real tenant cluster, with psql as the tenant: the owner creates and uses
 * those on the allow-list, every other one is refused (trusted ones by the guard, untrusted ones by
 * PostgreSQL), the guard cannot be removed or bypassed, shadows the tenant plants in public never run
 * as a superuser, and the reconciler brings an older database's guard to the configuration.
 */
import { TestPlatform } from "../support/platform";
import { asAdmin, callerMeta, dbaasApp, psql, startDbaasPlatform, stopDbaasPlatform } from "./dbaas.helpers";

type Created = { id: string; username: string; connectionString: string; databaseName: string };
type Detail = { extensions?: { available: string[]; installed: string[] } };

// The default allow-list's extensions installed with Debian's PostgreSQL 15 (PostGIS is not, nor would it be offered: untrusted).
const OFFERED = ["btree_gin", "btree_gist", "citext", "fuzzystrmatch", "hstore", "pg_trgm", "pgcrypto", "tablefunc", "unaccent", "uuid-ossp"];
const USE: Record<string, string> = {
  btree_gin: "CREATE TABLE g (n int); CREATE INDEX ON g USING gin (n)",
  btree_gist: "CREATE TABLE gi (n int); CREATE INDEX ON gi USING gist (n)",
  citext: "SELECT 'A'::citext = 'a'::citext",
  fuzzystrmatch: "SELECT levenshtein('kitten', 'sitting')",
  hstore: "SELECT ('a=>1'::hstore) -> 'a'",
  pg_trgm: "SELECT similarity('word', 'words') > 0.5",
  pgcrypto: "SELECT length(gen_random_bytes(8))",
  tablefunc: "SELECT count(*) FROM normal_rand(3, 0, 1)",
  unaccent: "SELECT unaccent('Hôtel')",
  "uuid-ossp": "SELECT length(uuid_generate_v4()::text)",
};

/** psql's error for a statement that must fail (the test fails if it succeeds). */
function refused(connectionString: string, statement: string): string {
  const run = psql(connectionString, statement);
  expect([statement, run.status]).toEqual([statement, 1]);
  return run.stderr;
}

describe("dbaas extensions", () => {
  let platform: TestPlatform;
  let owner = callerMeta();
  const create = () => platform.broker.call<Created, object>("dbaas.create", {}, { meta: owner });
  const detail = (id: string) => platform.broker.call<Detail, object>("dbaas.get", { id }, { meta: owner });
  const superuser = (username: string) =>
    asAdmin(async (c) => (await c.query("SELECT rolsuper FROM pg_roles WHERE rolname = $1", [username])).rows[0].rolsuper);

  beforeAll(async () => {
    platform = await startDbaasPlatform();
  });
  afterAll(() => stopDbaasPlatform(platform));
  beforeEach(() => (owner = callerMeta())); // each test an account of its own (5 databases each at most)

  it("dbaas extensions - the owner creates and uses every available one with psql; the detail lists them", async () => {
    const db = await create();
    expect((await detail(db.id)).extensions).toEqual({ available: OFFERED, installed: [] });
    for (const name of OFFERED) {
      const run = psql(db.connectionString, `CREATE EXTENSION "${name}"`, USE[name]);
      expect([name, run.status, run.stderr]).toEqual([name, 0, ""]);
    }
    expect((await detail(db.id)).extensions).toEqual({ available: OFFERED, installed: OFFERED });
    expect(await superuser(db.username)).toBe(false);
    // Its own extensions: the owner may drop them again.
    expect(psql(db.connectionString, "DROP EXTENSION citext").status).toBe(0);
  });

  it("dbaas extensions - everything else is refused: trusted ones off the list (CASCADE too) and untrusted ones", async () => {
    const db = await create();
    for (const statement of ["CREATE EXTENSION lo", "CREATE EXTENSION ltree", "CREATE EXTENSION earthdistance CASCADE", "CREATE EXTENSION intarray"]) {
      expect(refused(db.connectionString, statement)).toMatch(/is not available on this platform/);
    }
    for (const statement of [
      "CREATE EXTENSION dblink",
      "CREATE EXTENSION file_fdw",
      "CREATE EXTENSION adminpack",
      "CREATE EXTENSION postgres_fdw",
      "CREATE EXTENSION pageinspect",
    ])
      expect(refused(db.connectionString, statement)).toMatch(/permission denied|not available/);
    expect((await detail(db.id)).extensions?.installed).toEqual([]);
  });

  it("dbaas extensions - the guard cannot be dropped, replaced or switched off by the tenant", async () => {
    const db = await create();
    for (const statement of [
      "DROP EVENT TRIGGER dbaas_allowed_extensions",
      "ALTER EVENT TRIGGER dbaas_allowed_extensions DISABLE",
      "SET session_replication_role = replica",
      "DROP SCHEMA dbaas_guard CASCADE",
      "CREATE OR REPLACE FUNCTION dbaas_guard.allowed_extensions() RETURNS event_trigger LANGUAGE plpgsql AS 'BEGIN END'",
      "ALTER SCHEMA dbaas_guard RENAME TO mine",
      "CREATE EVENT TRIGGER mine ON ddl_command_start EXECUTE FUNCTION pg_catalog.now()",
      "SELECT * FROM dbaas_guard.pooler_lookup('postgres')",
    ])
      refused(db.connectionString, statement);
    expect(psql(db.connectionString, "CREATE EXTENSION lo").stderr).toMatch(/is not available on this platform/);
  });

  it("dbaas extensions - shadows planted in public never run as a superuser while an extension is created", async () => {
    const db = await create();
    // Each would make its caller's role a superuser, should an extension script (run as the bootstrap superuser) resolve to it.
    const body = `$$ BEGIN EXECUTE format('ALTER ROLE ${db.username} SUPERUSER'); RETURN NULL; END $$`;
    const shadows = [
      `CREATE FUNCTION public.set_config(text, text, boolean) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.lower(varchar) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.regexp_replace(varchar, varchar, varchar) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.array_to_string(text[], varchar) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.textcat(varchar, varchar) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.digest(varchar, varchar) RETURNS bytea LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.hstore(text) RETURNS text LANGUAGE plpgsql AS ${body}`,
      `CREATE FUNCTION public.similarity(varchar, varchar) RETURNS real LANGUAGE plpgsql AS ${body}`,
      "CREATE TEMP TABLE pg_extension (x int)",
    ];
    expect(psql(db.connectionString, ...shadows.slice(0, -1)).status).toBe(0);
    for (const name of OFFERED) {
      const run = psql(db.connectionString, shadows[shadows.length - 1], `CREATE EXTENSION "${name}"`);
      expect([name, run.status]).toEqual([name, 0]);
    }
    expect(await superuser(db.username)).toBe(false);
    // An object the script would create, made first by the tenant: the creation fails, nothing of the tenant's is replaced (CVE-2022-2625).
    const taken = psql(
      db.connectionString,
      "DROP EXTENSION pgcrypto",
      `CREATE FUNCTION public.digest(text, text) RETURNS bytea LANGUAGE plpgsql AS ${body}`,
      "CREATE EXTENSION pgcrypto",
    );
    expect([taken.status, taken.stderr]).toEqual([1, expect.stringMatching(/already exists/)]);
    // A schema of the tenant's as the extension's target: still its own rights only.
    const run = psql(db.connectionString, "CREATE SCHEMA mine", "DROP EXTENSION hstore", "CREATE EXTENSION hstore SCHEMA mine");
    expect(run.status).toBe(0);
    expect(await superuser(db.username)).toBe(false);
  });

  it("dbaas extensions - a branch keeps the snapshot's extensions, and its own guard", async () => {
    const db = await create();
    expect(psql(db.connectionString, "CREATE EXTENSION citext", "CREATE TABLE t (c citext)", "INSERT INTO t VALUES ('A')").status).toBe(0);
    const snap = await platform.broker.call<{ id: string }, object>("dbaas.createSnapshot", { id: db.id }, { meta: owner });
    await dbaasApp(platform).snapshotter.settled();
    const branch = await platform.broker.call<Created, object>("dbaas.create", { fromSnapshot: snap.id }, { meta: owner });
    expect((await detail(branch.id)).extensions?.installed).toEqual(["citext"]);
    expect(psql(branch.connectionString, "SELECT count(*) FROM t WHERE c = 'a'").stdout.trim()).toBe("1");
    expect(psql(branch.connectionString, "CREATE EXTENSION lo").stderr).toMatch(/is not available on this platform/);
  });

  it("dbaas extensions - a database without the guard (older) gets it from the reconciler", async () => {
    const db = await create();
    const app = dbaasApp(platform);
    await asAdmin((c) => c.query("DROP EVENT TRIGGER dbaas_allowed_extensions"), db.databaseName);
    await platform.broker.call("dbaas.reconcile", {});
    expect(psql(db.connectionString, "CREATE EXTENSION lo").status).toBe(0); // the record says it is there: nothing re-applied
    await app.repo.markExtensionPolicy(db.id, "");
    await asAdmin((c) => c.query("DROP EXTENSION lo"), db.databaseName);
    await platform.broker.call("dbaas.reconcile", {});
    expect(psql(db.connectionString, "CREATE EXTENSION lo").stderr).toMatch(/is not available on this platform/);
  });
});
