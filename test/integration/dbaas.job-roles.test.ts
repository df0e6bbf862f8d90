/**
 * GPU jobs' database roles (issue 28) against the real tenant cluster: a granted role logs in with
 * psql and does what the owner does (its tables belong to the owner), and under its own name
 * nothing; revoking ends its open session and drops it within 5 s, also when its database is gone;
 * a freeze ends its sessions as the owner's; another account's database is 404 and creates nothing.
 */
import { randomUUID } from "crypto";
import { TestPlatform, waitFor } from "../support/platform";
import {
  asAdmin,
  callerMeta,
  connectRefusal,
  dbaasApp,
  existing,
  markerOf,
  psql,
  refusal,
  startDbaasPlatform,
  stopDbaasPlatform,
  withClient,
} from "./dbaas.helpers";

type Created = { id: string; username: string; password: string; connectionString: string; databaseName: string };
type Grant = { database: string; user: string; password: string };

describe("dbaas job roles", () => {
  let platform: TestPlatform;
  const owner = callerMeta();
  const clientId = owner.caller.clientId;
  const create = () => platform.broker.call<Created, object>("dbaas.create", {}, { meta: owner });
  const grant = (databaseId: string, jobId: string, account = clientId) =>
    platform.broker.call<Grant, object>("dbaas.grantJobRole", { clientId: account, jobId, databaseId, validForSeconds: 600 });
  const revoke = (jobId: string) => platform.broker.call<{ revoked: number }, object>("dbaas.revokeJobRoles", { jobId });
  /** The owner's connection string with the job role's credentials instead. */
  const asJob = (db: Created, g: Grant) => db.connectionString.replace(`${db.username}:${db.password}`, `${g.user}:${g.password}`);
  const recorded = async (jobId: string) => (await dbaasApp(platform).jobRoles.ofJob(jobId)).map((r) => r.role_name);

  beforeAll(async () => {
    platform = await startDbaasPlatform();
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas job roles - the role logs in with psql and works as the owner; revoking ends its session and drops it within 5 s", async () => {
    const db = await create();
    const jobId = randomUUID();
    const g = await grant(db.id, jobId);
    expect(g.database).toBe(db.databaseName);
    expect(g.user).toMatch(/^job_[0-9a-f]{16}$/);
    expect(g.password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(await recorded(jobId)).toEqual([g.user]);

    const run = psql(
      asJob(db, g),
      "CREATE TABLE made_by_job (n int)",
      "INSERT INTO made_by_job VALUES (7)",
      "SELECT tableowner FROM pg_tables WHERE tablename = 'made_by_job'",
    );
    expect([run.status, run.stderr]).toEqual([0, ""]);
    expect(run.stdout.trim().split("\n").pop()).toBe(db.username); // the owner's table: the owner keeps it
    expect(psql(db.connectionString, "SELECT n FROM made_by_job").stdout.trim()).toBe("7");
    // Limited like a job's: a few connections, a password that expires by itself.
    const role = await asAdmin(async (c) => (await c.query("SELECT rolconnlimit, rolvaliduntil, rolsuper FROM pg_roles WHERE rolname = $1", [g.user])).rows[0]);
    expect(role.rolconnlimit).toBeGreaterThan(0);
    expect(role.rolsuper).toBe(false);
    expect(new Date(role.rolvaliduntil).getTime()).toBeGreaterThan(Date.now());

    let open = false;
    const held = withClient(asJob(db, g), async (client) => {
      const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
      await client.query("SELECT 1");
      open = true;
      await ended;
    });
    await waitFor(() => open, { message: "the job role's session" });
    const started = Date.now();
    expect(await revoke(jobId)).toEqual({ revoked: 1 });
    await held; // the server ended it
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await existing({ roles: [g.user] })).toEqual([]);
    expect(await connectRefusal(asJob(db, g))).toBe("28P01");
    expect(await recorded(jobId)).toEqual([]);
    // Idempotent; the owner is untouched.
    expect(await revoke(jobId)).toEqual({ revoked: 0 });
    expect(psql(db.connectionString, "SELECT count(*) FROM made_by_job").stdout.trim()).toBe("1");
  });

  it("dbaas job roles - under its own name (SET ROLE NONE) the role can create nothing; two roles of one job both go; one whose database is gone is still dropped", async () => {
    const db = await create();
    const jobId = randomUUID();
    const [a, b] = [await grant(db.id, jobId), await grant(db.id, jobId)];
    await withClient(asJob(db, a), async (client) => {
      await client.query("SET ROLE NONE"); // RESET ROLE would return to the session default: the owner
      expect(await refusal(client, "CREATE TABLE public.own_name (n int)")).toBe("42501");
      expect(await refusal(client, "CREATE TEMP TABLE own_temp (n int)")).toBe("42501");
      await client.query("SET ROLE " + db.username); // its membership stays: back to the owner's rights
      await client.query("CREATE TABLE as_owner (n int)");
    });
    expect(await revoke(jobId)).toEqual({ revoked: 2 });
    expect(await existing({ roles: [a.user, b.user] })).toEqual([]);
    expect(psql(db.connectionString, "SELECT tableowner FROM pg_tables WHERE tablename = 'as_owner'").stdout.trim()).toBe(db.username);

    const other = randomUUID();
    const c = await grant(db.id, other);
    await platform.broker.call("dbaas.destroy", { id: db.id }, { meta: owner });
    expect(await revoke(other)).toEqual({ revoked: 1 });
    expect(await existing({ roles: [c.user] })).toEqual([]);
  });

  it("dbaas job roles - a freeze (over quota) ends the job role's sessions too, and leaves it read-only like the owner", async () => {
    const db = await create();
    const jobId = randomUUID();
    const g = await grant(db.id, jobId);
    let open = false;
    const held = withClient(asJob(db, g), async (client) => {
      const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
      await client.query("BEGIN; CREATE TABLE locked (n int)"); // an open transaction holding a lock
      open = true;
      await ended;
    });
    await waitFor(() => open, { message: "the job role's transaction" });
    const server = dbaasApp(platform).tenant;
    const ref = { databaseName: db.databaseName, username: db.username };
    await server.freeze(ref, await markerOf(platform));
    await held; // ended by the freeze
    const write = psql(asJob(db, g), "CREATE TABLE after_freeze (n int)");
    expect(write.status).not.toBe(0);
    expect(psql(asJob(db, g), "SELECT 1").stdout.trim()).toBe("1"); // reads still work
    await server.thaw(ref);
    expect(await revoke(jobId)).toEqual({ revoked: 1 });
  });

  it("dbaas job roles - another account's database, an unknown id and a malformed one are 404 and create nothing", async () => {
    const db = await create();
    const stranger = randomUUID();
    const jobId = randomUUID();
    for (const [id, account] of [
      [db.id, stranger],
      [randomUUID(), clientId],
      ["not-a-uuid", clientId],
    ] as const) {
      await expect(grant(id, jobId, account)).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
      await expect(platform.broker.call("dbaas.checkJobDatabases", { clientId: account, databaseIds: [id] })).rejects.toMatchObject({ code: 404 });
    }
    expect(await recorded(jobId)).toEqual([]);
    await expect(platform.broker.call("dbaas.checkJobDatabases", { clientId, databaseIds: [db.id] })).resolves.toEqual({ ok: true });
  });
});
