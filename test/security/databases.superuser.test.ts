/**
 * CVE-2018-1058 against dbaas: a tenant plants functions and operators in its own schema public
 * that PostgreSQL's overload resolution prefers to pg_catalog's (more specific argument types), so
 * an admin statement calling has_database_privilege, format or `=` unqualified on the default
 * search_path would run the tenant's code as the superuser. Every admin path that works inside the
 * tenant's database is run here; the planted code must never run, the tenant must never become
 * superuser, and the quota must still freeze and thaw. Real tenant cluster (5433) and pg tools.
 */
import type { Client } from "pg";
import type { DatabaseCreated } from "../../services/dbaas/dbaas.service";
import type { QuotaReport } from "../../services/dbaas/quota";
import type { TestPlatform } from "../support/platform";
import { asAdmin, callerMeta, dbaasApp, refusal, startDbaasPlatform, stopDbaasPlatform, withClient } from "../integration/dbaas.helpers";

// An empty database from template0 is about 7.2 MiB; 3,500 rows of 1 kB take it past 9 MiB.
const QUOTA_MB = 9;
const FILL = "INSERT INTO big (payload) SELECT repeat('x', 1000) FROM generate_series(1, 3500)";

/**
 * The tenant's trap: pwn() records who ran it (a sequence, which no rollback undoes, and a row) and
 * tries to make the tenant superuser; every overload below calls it, then answers as the original
 * would, so the admin statement goes on unaware. Each signature is an exact match for arguments the
 * admin SQL passes (name, oid, regclass, regnamespace, an int constant against an oid).
 */
function trapSql(tenant: string): string {
  const pwn = (name: string, args: string, body: string, returns = "boolean") =>
    `CREATE FUNCTION public.${name}(${args}) RETURNS ${returns} LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('${name}'); RETURN ${body}; END $f$;`;
  return `CREATE TABLE public.pwned (who text, via text);
    CREATE SEQUENCE public.pwned_calls;
    CREATE FUNCTION public.pwn(via text) RETURNS void LANGUAGE plpgsql AS $f$
    BEGIN
      IF current_user::text OPERATOR(pg_catalog.<>) '${tenant}' THEN
        PERFORM pg_catalog.nextval('public.pwned_calls');
        INSERT INTO public.pwned VALUES (current_user, via);
        BEGIN
          EXECUTE 'ALTER ROLE ${tenant} SUPERUSER';
        EXCEPTION WHEN others THEN NULL;
        END;
      END IF;
    END $f$;
    ${pwn("has_database_privilege", "u text, d name, p text", "pg_catalog.has_database_privilege(u::name, d::text, p)")}
    ${pwn("has_schema_privilege", "u text, o oid, p text", "pg_catalog.has_schema_privilege(u::name, o, p)")}
    ${pwn("has_table_privilege", "u text, o oid, p text", "pg_catalog.has_table_privilege(u::name, o, p)")}
    ${pwn("has_table_privilege", "u text, o regclass, p text", "pg_catalog.has_table_privilege(u::name, o::oid, p)")}
    ${pwn("has_sequence_privilege", "u text, o oid, p text", "pg_catalog.has_sequence_privilege(u::name, o, p)")}
    ${pwn("has_any_column_privilege", "u text, o oid, p text", "pg_catalog.has_any_column_privilege(u::name, o, p)")}
    ${pwn("has_function_privilege", "u text, o oid, p text", "pg_catalog.has_function_privilege(u::name, o, p)")}
    ${pwn("has_function_privilege", "u text, o regprocedure, p text", "pg_catalog.has_function_privilege(u::name, o::oid, p)")}
    ${pwn("format", "f text, a regnamespace, b text", "pg_catalog.format(f, a, b)", "text")}
    ${pwn("format", "f text, a text, b regclass, c text", "pg_catalog.format(f, a, b, c)", "text")}
    ${pwn("oid_is_int", "a oid, b integer", "a OPERATOR(pg_catalog.=) b::oid")}
    CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.oid_is_int);
    CREATE TABLE big (id serial PRIMARY KEY, payload text NOT NULL)`;
}

describe("databases - a tenant's functions never run as the platform's superuser (CVE-2018-1058)", () => {
  let platform: TestPlatform;
  let db: DatabaseCreated;
  let branch: DatabaseCreated | undefined;
  const meta = callerMeta();
  const call = <T>(action: string, params: object = {}) => platform.broker.call<T, object>(`dbaas.${action}`, params, { meta });
  const tenant = <T>(work: (c: Client) => Promise<T>) => withClient(db.connectionString, work);
  const ref = () => ({ databaseName: db.databaseName, username: db.username });

  /** What the trap left in `database`: calls counted by its sequence, and who ran it. */
  const trapped = (database: string) =>
    asAdmin(
      async (c) =>
        (
          await c.query<{ calls: string; who: string[] | null }>(
            `SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.pwned_calls)::text AS calls,
                    (SELECT pg_catalog.array_agg(DISTINCT who || ' via ' || via) FROM public.pwned) AS who`,
          )
        ).rows[0],
      database,
    );

  /** The trap never ran in any of the tenant's databases, and its roles are no superusers. */
  async function expectUntouched(): Promise<void> {
    const dbs = [db, ...(branch ? [branch] : [])];
    for (const d of dbs) expect([d.databaseName, await trapped(d.databaseName)]).toEqual([d.databaseName, { calls: "0", who: null }]);
    const supers = await asAdmin(
      async (c) => (await c.query("SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[]) AND rolsuper", [dbs.map((d) => d.username)])).rows,
    );
    expect(supers).toEqual([]);
  }

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_STORAGE_MB: String(QUOTA_MB), DBAAS_MAX_PER_ACCOUNT: "4", QUOTA_STORAGE_MB: "200" } });
    db = await call<DatabaseCreated>("create");
    await tenant((c) => c.query(trapSql(db.username)));
  });
  afterAll(() => stopDbaasPlatform(platform));
  // Each path is judged on its own: what an earlier one let the trap do is undone.
  afterEach(() =>
    asAdmin(async (c) => {
      await c.query(`ALTER ROLE ${db.username} NOSUPERUSER`);
      await c.query("TRUNCATE public.pwned; SELECT pg_catalog.setval('public.pwned_calls', 1, false)");
    }, db.databaseName),
  );

  it("schema preparation and every catalog level run none of the tenant's functions", async () => {
    // Nor can the tenant unpin dbaas's search_path: the database's settings are its owner's (and a connection's options win anyway).
    expect(await tenant((c) => refusal(c, `ALTER DATABASE ${db.databaseName} SET search_path = public`))).toBe("42501");
    const server = dbaasApp(platform).tenant;
    await server.prepareSchema(ref(), "sessions");
    await server.setCatalogLevel(db.databaseName, "all");
    await server.setCatalogLevel(db.databaseName, "off");
    await server.setCatalogLevel(db.databaseName, "sessions");
    await expectUntouched();
  });

  it("password rotation, the reconciler and the usage sampler run none of the tenant's functions", async () => {
    const rotated = await call<{ connectionString: string }>("rotatePassword", { id: db.id });
    db = { ...db, connectionString: rotated.connectionString };
    await tenant((c) => c.query("SELECT 1"));
    await platform.broker.call("dbaas.reconcile", { graceS: 3600 });
    await platform.broker.call("dbaas.sampleUsage");
    await expectUntouched();
  });

  it("a snapshot (pg_dump) and a branch restored from it (pg_restore) run none of the tenant's functions", async () => {
    const snap = await call<{ id: string }>("createSnapshot", { id: db.id });
    await dbaasApp(platform).snapshotter.settled();
    expect(await call<{ status: string }>("getSnapshot", { id: snap.id })).toMatchObject({ status: "ready" });
    branch = await call<DatabaseCreated>("create", { fromSnapshot: snap.id, maxStorageMb: QUOTA_MB });
    // The branch carries the trap too (restored as its own role); a quota round measures it.
    expect(
      await withClient(branch.connectionString, async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_operator WHERE oprname = '='")).rows[0].n),
    ).toBeGreaterThan(0);
    await platform.broker.call<QuotaReport>("dbaas.checkQuota");
    await expectUntouched();
  });

  it("the quota still freezes, stays frozen when verified again, and thaws, without running the tenant's functions", async () => {
    await tenant((c) => c.query(FILL));
    const frozen = await platform.broker.call<QuotaReport>("dbaas.checkQuota");
    expect({ frozen: frozen.frozen, failed: frozen.failed }).toEqual({ frozen: [db.id], failed: [] });
    expect(await tenant((c) => refusal(c, "INSERT INTO big (payload) VALUES ('more')"))).toBe("42501");
    // A frozen database is checked for write paths every round (frozenWritePathsSql).
    const again = await platform.broker.call<QuotaReport>("dbaas.checkQuota");
    expect({ frozen: again.frozen, refrozen: again.refrozen, failed: again.failed }).toEqual({ frozen: [], refrozen: [], failed: [] });
    await expectUntouched();

    await tenant((c) => c.query("TRUNCATE big"));
    expect((await platform.broker.call<QuotaReport>("dbaas.checkQuota")).thawed).toEqual([db.id]);
    await tenant((c) => c.query("INSERT INTO big (payload) VALUES ('again')"));
    await expectUntouched();
  });
});
