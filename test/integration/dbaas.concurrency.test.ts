/**
 * dbaas under concurrency against the real tenant cluster: 20 provisions at once while a session
 * holds template1, the per-account limit under a race, and concurrent destroys.
 */
import type { TestPlatform } from "../support/platform";
import type { DatabaseCreated } from "../../services/dbaas/dbaas.service";
import { asAdmin, callerMeta, existing, startDbaasPlatform, stopDbaasPlatform, withClient } from "./dbaas.helpers";

describe("dbaas concurrency", () => {
  let platform: TestPlatform;

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_PER_ACCOUNT: "5" } });
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas concurrency - 20 provisions at once succeed while a session holds template1, then 20 destroys", async () => {
    const accounts = Array.from({ length: 4 }, () => callerMeta());
    const created = await asAdmin(async (template1Session) => {
      await template1Session.query("BEGIN; SELECT count(*) FROM pg_class"); // an open transaction on template1
      return Promise.all(
        Array.from({ length: 20 }, (_, i) => {
          const meta = accounts[i % accounts.length];
          return platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta }).then((db) => ({ db, meta }));
        }),
      );
    }, "template1");

    expect(created).toHaveLength(20);
    expect(new Set(created.map((c) => c.db.databaseName)).size).toBe(20);
    expect(new Set(created.map((c) => c.db.username)).size).toBe(20);
    await Promise.all(
      created.map(({ db }) =>
        withClient(db.connectionString, async (client) => {
          await client.query("CREATE TABLE t (x int); INSERT INTO t VALUES (1)");
          expect((await client.query("SELECT current_database() AS name")).rows[0].name).toBe(db.databaseName);
        }),
      ),
    );
    for (const meta of accounts) {
      const list = await platform.broker.call<{ databases: unknown[] }, object>("dbaas.list", {}, { meta });
      expect(list.databases).toHaveLength(5);
    }

    const destroyed = await Promise.all(created.map(({ db, meta }) => platform.broker.call("dbaas.destroy", { id: db.id }, { meta })));
    expect(destroyed).toEqual(created.map(({ db }) => ({ message: `Database ${db.databaseName} destroyed` })));
    expect(await existing({ databases: created.map((c) => c.db.databaseName), roles: created.map((c) => c.db.username) })).toEqual([]);
  });

  it("dbaas concurrency - 8 provisions at once for one account: exactly the limit succeed, the rest get 403", async () => {
    const meta = callerMeta();
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta })));
    const ok = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(ok).toHaveLength(5);
    expect(refused).toHaveLength(3);
    for (const r of refused) expect(r.reason).toMatchObject({ code: 403, type: "QUOTA_EXCEEDED" });
    const rows = await withClient(
      platform.databaseUrl,
      async (c) => (await c.query("SELECT status FROM dbaas.databases WHERE client_id = $1", [meta.caller.clientId])).rows,
    );
    expect(rows).toEqual(Array(5).fill({ status: "active" }));
  });
});
