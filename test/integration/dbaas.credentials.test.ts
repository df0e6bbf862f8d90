/**
 * Password rotation against the real tenant cluster: the new password works (with psql), the old
 * one is refused at once, sessions opened with it are ended; another account's database is 404,
 * one not ready is 409, and a refused rotation changes nothing.
 */
import { randomUUID } from "crypto";
import { TestPlatform, waitFor } from "../support/platform";
import { callerMeta, connectRefusal, dbaasApp, psql, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";

type Created = { id: string; username: string; password: string; connectionString: string; databaseName: string };
type Rotated = { id: string; username: string; password: string; connectionString: string };

describe("dbaas credentials", () => {
  let platform: TestPlatform;
  const owner = callerMeta();
  const create = () => platform.broker.call<Created, object>("dbaas.create", {}, { meta: owner });
  const rotate = (id: string, meta = owner) => platform.broker.call<Rotated, { id: string }>("dbaas.rotatePassword", { id }, { meta });

  beforeAll(async () => {
    platform = await startDbaasPlatform();
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas credentials - rotation ends the open session, refuses the old password, and the new one works with psql", async () => {
    const db = await create();
    // A session on the old password, open across the rotation.
    let open = false;
    const held = withClient(db.connectionString, async (client) => {
      const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
      await client.query("CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)");
      open = true;
      await ended;
    });
    await waitFor(() => open, { message: "the session on the old password" });

    const rotated = await rotate(db.id);
    expect(Object.keys(rotated).sort()).toEqual(["connectionString", "id", "password", "username"]);
    expect(rotated).toMatchObject({ id: db.id, username: db.username });
    expect(rotated.password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(rotated.password).not.toBe(db.password);
    expect(rotated.connectionString).toBe(db.connectionString.replace(db.password, rotated.password));

    await held; // the server ended it: "end" fired
    expect(await connectRefusal(db.connectionString)).toBe("28P01");
    const run = psql(rotated.connectionString, "SELECT n FROM kept");
    expect([run.status, run.stdout.trim()]).toEqual([0, "1"]);

    // Rotating again retires the second password too.
    const again = await rotate(db.id);
    expect(await connectRefusal(rotated.connectionString)).toBe("28P01");
    expect(psql(again.connectionString, "SELECT 1").status).toBe(0);
  });

  it("dbaas credentials - another account's database, a malformed id and an unknown id are 404 and change nothing", async () => {
    const db = await create();
    for (const [id, meta] of [
      [db.id, callerMeta()],
      ["not-a-uuid", owner],
      [randomUUID(), owner],
    ] as const) {
      await expect(rotate(id, meta)).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
    }
    expect(psql(db.connectionString, "SELECT 1").status).toBe(0);
  });

  it("dbaas credentials - a database still being provisioned is 409 INVALID_STATE", async () => {
    const repo = dbaasApp(platform).repo;
    const id = randomUUID();
    const hex = id.replace(/-/g, "");
    await repo.insertProvisioning(
      {
        id,
        clientId: owner.caller.clientId,
        databaseName: `client_${hex.slice(0, 8)}_${hex.slice(8, 16)}`,
        username: `user_${hex.slice(16, 28)}`,
        maxStorageMb: 10,
      },
      100,
    );
    try {
      await expect(rotate(id)).rejects.toMatchObject({ code: 409, type: "INVALID_STATE" });
    } finally {
      await repo.delete(id);
    }
  });
});
