/**
 * dbaas under faults, against the real tenant cluster: a failure after each provisioning step
 * leaves nothing behind, the reconciler removes what a crash left (and nothing of anyone else),
 * and a tenant server that is down answers 503 without recording anything.
 */
import { randomUUID } from "crypto";
import net from "net";
import { Client } from "pg";
import { startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { Provisioner, PROVISION_STEPS } from "../../services/dbaas/provisioner";
import type { TenantNames } from "../../services/dbaas/naming";
import { generateNames } from "../../services/dbaas/naming";
import {
  asAdmin,
  callerMeta,
  dbaasApp,
  existing,
  injectFaults,
  markerOf,
  namesOf,
  records,
  startDbaasPlatform,
  stopDbaasPlatform,
  tenantEnv,
  withClient,
} from "./dbaas.helpers";

describe("dbaas faults", () => {
  let platform: TestPlatform;
  let marker: string;
  let faultless: Provisioner | undefined;

  beforeAll(async () => {
    platform = await startDbaasPlatform();
    marker = await markerOf(platform);
  });
  afterEach(() => {
    if (faultless) dbaasApp(platform).provisioner = faultless;
    faultless = undefined;
  });
  afterAll(() => stopDbaasPlatform(platform));

  it.each(PROVISION_STEPS.map((step) => [step]))("dbaas faults - a failure after step %s leaves no role, database or record", async (failing) => {
    let names: TenantNames | undefined;
    const seen: string[] = [];
    faultless = injectFaults(platform, (step, n) => {
      names = n;
      seen.push(step);
      if (step === failing) throw new Error(`injected fault after ${step}`);
    });
    await expect(platform.broker.call("dbaas.create", {}, { meta: callerMeta() })).rejects.toThrow(`injected fault after ${failing}`);
    expect(seen[seen.length - 1]).toBe(failing);
    expect(names).toBeDefined();
    expect(await existing(namesOf(names!))).toEqual([]);
    expect(await records(platform)).toEqual([]);
  });

  it("dbaas faults - the reconciler removes what a crash left, and nothing of anyone else", async () => {
    const { tenant, repo } = dbaasApp(platform);
    const clientId = randomUUID();
    const create = async (n: TenantNames, opts: { marked: boolean }) => {
      await tenant.createRole(n, "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy", 5, marker);
      await tenant.createDatabase(n);
      if (opts.marked) await tenant.secureDatabase(n, marker);
    };
    // A process that died after CREATE DATABASE (before marking it): only its record knows it.
    const crashed = generateNames(clientId);
    await repo.insertProvisioning({ id: randomUUID(), clientId, ...crashed, maxStorageMb: 10 }, 100);
    await create(crashed, { marked: false });
    // Marked objects whose record is gone.
    const orphan = generateNames(clientId);
    await create(orphan, { marked: true });
    // A provisioning in progress right now (within the grace period) must survive a normal pass.
    const inProgress = generateNames(clientId);
    await repo.insertProvisioning({ id: randomUUID(), clientId, ...inProgress, maxStorageMb: 10 }, 100);
    await create(inProgress, { marked: false });
    // Another platform's objects on the same server: another marker, and none at all.
    const foreign = generateNames(clientId);
    const unmarked = generateNames(clientId);
    await asAdmin(async (admin) => {
      await admin.query(`CREATE ROLE "${foreign.username}" NOLOGIN; COMMENT ON ROLE "${foreign.username}" IS 'ci-platform:dbaas:${randomUUID()}'`);
      await admin.query(`CREATE DATABASE "${foreign.databaseName}" TEMPLATE template0`);
      await admin.query(`COMMENT ON DATABASE "${foreign.databaseName}" IS 'ci-platform:dbaas:${randomUUID()}'`);
      await admin.query(`CREATE ROLE "${unmarked.username}" NOLOGIN`);
      await admin.query(`CREATE DATABASE "${unmarked.databaseName}" TEMPLATE template0`);
    });
    try {
      await platform.broker.call("dbaas.reconcile", {});
      expect(await existing(namesOf(orphan))).toEqual([]);
      expect(await existing(namesOf(crashed))).toEqual([crashed.databaseName, crashed.username].sort()); // still within grace
      expect(await existing(namesOf(inProgress))).toHaveLength(2);

      const report = await platform.broker.call<{ recordsDeleted: number }, object>("dbaas.reconcile", { graceS: 0 });
      expect(report.recordsDeleted).toBe(2);
      expect(await existing(namesOf(crashed))).toEqual([]);
      expect(await existing(namesOf(inProgress))).toEqual([]);
      expect(await records(platform)).toEqual([]);
      // Never touched: the other platform's and the unmarked objects.
      expect(await existing(namesOf(foreign))).toEqual([foreign.databaseName, foreign.username].sort());
      expect(await existing(namesOf(unmarked))).toEqual([unmarked.databaseName, unmarked.username].sort());
    } finally {
      await asAdmin(async (admin) => {
        for (const n of [foreign, unmarked]) {
          await admin.query(`DROP DATABASE IF EXISTS "${n.databaseName}" WITH (FORCE)`);
          await admin.query(`DROP ROLE IF EXISTS "${n.username}"`);
        }
      });
    }
  });

  it("dbaas faults - after a crash, the reconciler of the next start removes what was left", async () => {
    const first = await startTestPlatform({ services: ["dbaas"], env: tenantEnv(), dropDatabase: false });
    const leftover = generateNames(randomUUID());
    try {
      const firstMarker = await markerOf(first);
      const { tenant } = dbaasApp(first);
      await tenant.createRole(leftover, "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy", 5, firstMarker);
      await tenant.createDatabase(leftover);
      await tenant.secureDatabase(leftover, firstMarker);
    } finally {
      await first.stop(); // the process is gone; nothing cleaned up after it
    }
    expect(await existing(namesOf(leftover))).toHaveLength(2);
    const second = await startTestPlatform({ services: ["dbaas"], env: tenantEnv(), databaseUrl: first.databaseUrl });
    try {
      await waitFor(async () => (await existing(namesOf(leftover))).length === 0, { timeoutMs: 15_000, message: "the leftovers to be removed" });
    } finally {
      await stopDbaasPlatform(second);
    }
  });

  it("dbaas faults - a stuck destroy is finished by the reconciler", async () => {
    const meta = callerMeta();
    const created = await platform.broker.call<{ id: string; databaseName: string; username: string }, object>("dbaas.create", {}, { meta });
    await withClient(platform.databaseUrl, (c) => c.query("UPDATE dbaas.databases SET status = 'destroying' WHERE id = $1", [created.id]));
    await expect(platform.broker.call("dbaas.get", { id: created.id }, { meta })).rejects.toMatchObject({ code: 404 });
    await platform.broker.call("dbaas.reconcile", { graceS: 0 });
    expect(await existing({ databases: [created.databaseName], roles: [created.username] })).toEqual([]);
    expect(await records(platform)).toEqual([]);
  });
});

describe("dbaas faults - tenant server down", () => {
  let platform: TestPlatform;
  let closedPort: number;

  beforeAll(async () => {
    closedPort = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      });
    });
    platform = await startDbaasPlatform({ env: { DBAAS_ADMIN_URL: `postgresql://ci_admin:x@127.0.0.1:${closedPort}/postgres` } });
  });
  afterAll(() => platform?.stop());

  it("dbaas faults - provisioning answers 503 without host names and records nothing", async () => {
    const meta = callerMeta();
    const err = (await platform.broker.call("dbaas.create", {}, { meta }).catch((e) => e)) as Error;
    expect(err).toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE" });
    expect(err.message).not.toMatch(/127\.0\.0\.1|5433|ECONN|postgres/i);
    expect(await records(platform)).toEqual([]);
    await expect(platform.broker.call("dbaas.list", {}, { meta })).resolves.toEqual({ databases: [] });
  });

  it("dbaas faults - destroy answers 503 and the database stays listed", async () => {
    const meta = callerMeta();
    const id = randomUUID();
    const n = generateNames(meta.caller.clientId);
    await withClient(platform.databaseUrl, (c: Client) =>
      c.query(`INSERT INTO dbaas.databases (id, client_id, database_name, username, status, max_storage_mb) VALUES ($1, $2, $3, $4, 'active', 10)`, [
        id,
        meta.caller.clientId,
        n.databaseName,
        n.username,
      ]),
    );
    await expect(platform.broker.call("dbaas.destroy", { id }, { meta })).rejects.toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE" });
    await expect(platform.broker.call("dbaas.get", { id }, { meta })).resolves.toMatchObject({ id, databaseName: n.databaseName });
  });
});
