/**
 * dbaas on a broker against the real tenant cluster (scram-sha-256 over TCP): what a tenant's
 * credentials can and cannot do, what the platform keeps, and destroy with a session open; and
 * how records kept before catalog levels are read after the upgrade.
 */
import { Client } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { dropDatabase, testDatabaseUrl, TestPlatform } from "../support/platform";
import type { DatabaseCreated } from "../../services/dbaas/dbaas.service";
import { migrations } from "../../services/dbaas/migrations";
import { asAdmin, callerMeta, connectRefusal, existing, refusal, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";

describe("dbaas isolation", () => {
  let platform: TestPlatform;
  let a: DatabaseCreated;
  let b: DatabaseCreated;
  const accountA = callerMeta();
  const accountB = callerMeta();

  beforeAll(async () => {
    // As on a fresh server: PUBLIC may connect to postgres and template1 until dbaas starts.
    await asAdmin((admin) => admin.query("GRANT CONNECT, TEMPORARY ON DATABASE postgres, template1 TO PUBLIC"));
    platform = await startDbaasPlatform({ env: { DBAAS_CONNECTION_LIMIT: "7" } });
    [a, b] = await Promise.all([
      platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta: accountA }),
      platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta: accountB }),
    ]);
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas isolation - the connection string works: tables and rows", async () => {
    expect(a.connectionString).toBe(`postgresql://${a.username}:${a.password}@${a.host}:${a.port}/${a.databaseName}`);
    await withClient(a.connectionString, async (client) => {
      await client.query("CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)");
      await client.query("INSERT INTO notes (body) VALUES ('first'), ('second')");
      await client.query("CREATE SCHEMA app; CREATE TABLE app.settings (k text PRIMARY KEY, v text)");
      await client.query("INSERT INTO app.settings VALUES ('theme', 'dark')");
      const { rows } = await client.query("SELECT body FROM notes ORDER BY id");
      expect(rows.map((r) => r.body)).toEqual(["first", "second"]);
      const temp = await client.query("CREATE TEMP TABLE scratch (x int); INSERT INTO scratch VALUES (1); SELECT 1 AS ok");
      expect(temp).toBeDefined();
    });
  });

  it("dbaas isolation - a wrong password, or another tenant's credentials, are refused", async () => {
    const wrong = a.connectionString.replace(a.password, a.password.slice(0, -1) + (a.password.endsWith("x") ? "y" : "x"));
    expect(await connectRefusal(wrong)).toBe("28P01");
    // B's role and password, A's database: no CONNECT right.
    const crossed = `postgresql://${b.username}:${b.password}@${b.host}:${b.port}/${a.databaseName}`;
    expect(await connectRefusal(crossed)).toBe("42501");
    // Neither reaches the admin database or a template (dbaas closed them to PUBLIC at start).
    expect(await connectRefusal(`postgresql://${a.username}:${a.password}@${a.host}:${a.port}/postgres`)).toBe("42501");
    expect(await connectRefusal(`postgresql://${a.username}:${a.password}@${a.host}:${a.port}/template1`)).toBe("42501");
  });

  it("dbaas isolation - a tenant creates no database or role and cannot raise its own limits", async () => {
    await withClient(a.connectionString, async (client) => {
      const refusals = {
        createDatabase: await refusal(client, "CREATE DATABASE sneaky"),
        createRole: await refusal(client, "CREATE ROLE sneaky LOGIN"),
        connectionLimit: await refusal(client, `ALTER ROLE ${a.username} CONNECTION LIMIT -1`),
        createdb: await refusal(client, `ALTER ROLE ${a.username} CREATEDB`),
        superuser: await refusal(client, `ALTER ROLE ${a.username} SUPERUSER`),
        bypassRls: await refusal(client, `ALTER ROLE ${a.username} BYPASSRLS`),
        alterDatabase: await refusal(client, `ALTER DATABASE ${a.databaseName} CONNECTION LIMIT -1`),
        databaseSetting: await refusal(client, `ALTER DATABASE ${a.databaseName} SET default_transaction_read_only = off`),
        dropDatabase: await refusal(client, `DROP DATABASE ${b.databaseName}`),
        dropOtherRole: await refusal(client, `DROP ROLE ${b.username}`),
        grantOthers: await refusal(client, `GRANT ${a.username} TO ${b.username}`),
        readServerFiles: await refusal(client, "SELECT pg_read_file('/etc/passwd')"),
        copyProgram: await refusal(client, "COPY (SELECT 1) TO PROGRAM 'true'"),
      };
      for (const [what, code] of Object.entries(refusals)) expect([what, code]).toEqual([what, "42501"]);
      // GRANT on a database it does not own is a warning that grants nothing.
      await client.query(`GRANT CONNECT ON DATABASE ${a.databaseName} TO PUBLIC`).catch(() => undefined);
    });
    const acl = await asAdmin(async (admin) => {
      const { rows } = await admin.query("SELECT datacl::text AS acl, datdba::regrole::text AS owner FROM pg_database WHERE datname = $1", [a.databaseName]);
      return rows[0];
    });
    expect(acl.owner).not.toBe(a.username);
    expect(acl.acl).not.toMatch(/(^|[{,])=[A-Za-z]*c/); // PUBLIC has no CONNECT
  });

  it("dbaas isolation - the role has LOGIN and nothing more, a connection limit and a SCRAM verifier", async () => {
    const role = await asAdmin(async (admin) => {
      const { rows } = await admin.query(
        `SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, rolcanlogin, rolconnlimit, rolpassword
           FROM pg_authid WHERE rolname = $1`,
        [a.username],
      );
      return rows[0];
    });
    expect(role).toMatchObject({
      rolsuper: false,
      rolcreatedb: false,
      rolcreaterole: false,
      rolreplication: false,
      rolbypassrls: false,
      rolcanlogin: true,
      rolconnlimit: 7,
    });
    expect(role.rolpassword).toMatch(/^SCRAM-SHA-256\$4096:/);
    expect(role.rolpassword).not.toContain(a.password);
  });

  it("dbaas isolation - the platform keeps neither password nor connection string", async () => {
    const dump = await withClient(platform.databaseUrl, async (client) => {
      const { rows } = await client.query("SELECT row_to_json(d)::text AS row FROM dbaas.databases d");
      return rows.map((r) => r.row).join("\n");
    });
    expect(dump).toContain(a.username);
    expect(dump).not.toContain(a.password);
    expect(dump).not.toContain(b.password);
  });

  it("dbaas isolation - tenants see neither each other's data nor each other in the catalog's databases", async () => {
    await withClient(b.connectionString, async (client) => {
      expect(await refusal(client, "SELECT * FROM notes")).toBe("42P01"); // B's database has no such table
      const dblink = await refusal(client, "CREATE EXTENSION dblink");
      expect(["42501", "0A000", "58P01"]).toContain(dblink); // not allowed (or not even installed)
    });
  });

  it("dbaas isolation - detail and list of the owner only; another account gets 404", async () => {
    const detail = await platform.broker.call<Record<string, unknown>, object>("dbaas.get", { id: a.id }, { meta: accountA });
    expect(Object.keys(detail).sort()).toEqual([
      "createdAt",
      "databaseName",
      "extensions",
      "host",
      "id",
      "maxStorageMb",
      "port",
      "readOnly",
      "status",
      "storageMb",
      "username",
    ]);
    expect(detail.storageMb).toBeGreaterThan(1);
    await expect(platform.broker.call("dbaas.get", { id: a.id }, { meta: accountB })).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
    await expect(platform.broker.call("dbaas.destroy", { id: a.id }, { meta: accountB })).rejects.toMatchObject({ code: 404 });
    const listB = await platform.broker.call<{ databases: Array<{ id: string }> }, object>("dbaas.list", {}, { meta: accountB });
    expect(listB.databases.map((d) => d.id)).toEqual([b.id]);
  });

  it("dbaas isolation - destroy ends an open session, drops database and role, then the credentials fail", async () => {
    const session = new Client({ connectionString: b.connectionString });
    let sessionError: unknown;
    session.on("error", (err) => (sessionError = err));
    await session.connect();
    await session.query("BEGIN; CREATE TABLE held (x int); INSERT INTO held VALUES (1)"); // an open transaction holding locks
    try {
      const result = await platform.broker.call("dbaas.destroy", { id: b.id }, { meta: accountB });
      expect(result).toEqual({ message: `Database ${b.databaseName} destroyed` });
      await expect(session.query("SELECT 1")).rejects.toThrow();
      expect(sessionError ?? "terminated").toBeTruthy();
    } finally {
      await session.end().catch(() => undefined);
    }
    expect(await existing({ databases: [b.databaseName], roles: [b.username] })).toEqual([]);
    expect(await connectRefusal(b.connectionString)).toBe("28P01"); // the role is gone: authentication fails
    await expect(platform.broker.call("dbaas.get", { id: b.id }, { meta: accountB })).rejects.toMatchObject({ code: 404 });
    await expect(platform.broker.call("dbaas.destroy", { id: b.id }, { meta: accountB })).rejects.toMatchObject({ code: 404 });
  });
});

describe("dbaas catalog level - upgrade of the platform's records (migration 4)", () => {
  it("dbaas catalog level - a database hidden entirely before is recorded at `all`, an open one at `off`, one still provisioning as unknown", async () => {
    const databaseUrl = testDatabaseUrl();
    await ensureDatabase(databaseUrl);
    const pool = newPool({ connectionString: databaseUrl });
    try {
      expect(
        await migrate(
          pool,
          "dbaas",
          migrations.filter((m) => m.version <= 3),
        ),
      ).toEqual([1, 2, 3]);
      const insert = (id: string, status: string, hidden: boolean) =>
        pool.query(
          `INSERT INTO dbaas.databases (id, client_id, database_name, username, status, max_storage_mb, catalog_hidden)
           VALUES ($1, 'c', 'client_aaaaaaaa_' || $2, 'user_' || $2 || '0000', $3, 1, $4)`,
          [id, id.slice(-8), status, hidden],
        );
      await insert("00000000-0000-4000-8000-00000000000a", "active", true);
      await insert("00000000-0000-4000-8000-00000000000b", "active", false);
      await insert("00000000-0000-4000-8000-00000000000c", "provisioning", false);
      expect(
        await migrate(
          pool,
          "dbaas",
          migrations.filter((m) => m.version <= 4),
        ),
      ).toEqual([4]);
      const { rows } = await pool.query("SELECT right(id::text, 1) AS id, catalog_level, catalog_hidden FROM dbaas.databases ORDER BY id");
      expect(rows).toEqual([
        { id: "a", catalog_level: "all", catalog_hidden: true },
        // true: a replica of the previous version (rolling update) no longer hides it entirely
        { id: "b", catalog_level: "off", catalog_hidden: true },
        // the reconciler applies the configured level once it is active
        { id: "c", catalog_level: null, catalog_hidden: false },
      ]);
      await expect(pool.query("UPDATE dbaas.databases SET catalog_level = 'names'")).rejects.toMatchObject({ code: "23514" });
    } finally {
      await pool.end();
      await dropDatabase(databaseUrl);
    }
  });
});
