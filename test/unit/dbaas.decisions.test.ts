/** dbaas decisions: quota, reconciliation plan, fault classification and retries. Pure, no server. */
import { isTransient, isUnavailable, retryTransient } from "../../services/dbaas/faults";
import { neverSent } from "../../services/dbaas/provisioner";
import { decideQuota, MIB, QuotaState } from "../../services/dbaas/quota";
import { planReconcile, ReconcileRecord } from "../../services/dbaas/reconciler";

describe("dbaas quota", () => {
  it.each<[string, QuotaState, string]>([
    ["under, writable: nothing", { storageBytes: 5 * MIB, maxStorageMb: 10, readOnly: false }, "none"],
    ["exactly at the quota counts as under", { storageBytes: 10 * MIB, maxStorageMb: 10, readOnly: false }, "none"],
    ["one byte over: read-only", { storageBytes: 10 * MIB + 1, maxStorageMb: 10, readOnly: false }, "freeze"],
    ["over and already read-only: nothing", { storageBytes: 20 * MIB, maxStorageMb: 10, readOnly: true }, "none"],
    ["back under while read-only: writable", { storageBytes: 9 * MIB, maxStorageMb: 10, readOnly: true }, "thaw"],
    ["quota raised above the size: writable", { storageBytes: 20 * MIB, maxStorageMb: 1024, readOnly: true }, "thaw"],
  ])("dbaas quota - %s", (_name, state, expected) => {
    expect(decideQuota(state)).toBe(expected);
  });
});

describe("dbaas reconciler plan", () => {
  const now = new Date("2030-01-01T12:00:00Z");
  const ago = (s: number) => new Date(now.getTime() - s * 1000);
  const rec = (hex: string, status: ReconcileRecord["status"], ageS: number): ReconcileRecord => ({
    id: `id-${hex}`,
    databaseName: `client_aaaaaaaa_${hex.slice(-8)}`,
    username: `user_${hex}`,
    status,
    updatedAt: ago(ageS),
  });
  const graceMs = 300_000;

  it("dbaas reconciler plan - keeps active and recent records and their objects", () => {
    const active = rec("000000000001", "active", 10_000);
    const fresh = rec("000000000002", "provisioning", 5);
    const plan = planReconcile({
      records: [active, fresh],
      marked: {
        databases: [active.databaseName, fresh.databaseName],
        roles: [active.username, "hold_000000000001", fresh.username],
      },
      now,
      graceMs,
    });
    expect(plan).toEqual({ dropDatabases: [], dropRoles: [], deleteRecords: [] });
  });

  it("dbaas reconciler plan - removes the objects and records stuck past the grace period", () => {
    const stuck = rec("000000000003", "provisioning", 301);
    const halfDestroyed = rec("000000000004", "destroying", 3600);
    const plan = planReconcile({ records: [stuck, halfDestroyed], marked: { databases: [], roles: [] }, now, graceMs });
    expect(plan).toEqual({
      dropDatabases: [stuck.databaseName, halfDestroyed.databaseName].sort(),
      dropRoles: ["hold_000000000003", "hold_000000000004", "user_000000000003", "user_000000000004"],
      deleteRecords: [stuck.id, halfDestroyed.id].sort(),
    });
  });

  it("dbaas reconciler plan - leaves restores to pitr-jobs (even with a dead owner) and keeps failed records, dropping what they left", () => {
    const restoring = { ...rec("000000000006", "provisioning", 3600), ownerAlive: false, restore: true };
    const failed = { ...rec("000000000007", "failed", 3600), restore: true };
    const plan = planReconcile({
      records: [restoring, failed],
      marked: { databases: [restoring.databaseName, failed.databaseName], roles: [restoring.username, failed.username] },
      now,
      graceMs,
    });
    expect(plan).toEqual({ dropDatabases: [failed.databaseName], dropRoles: [failed.username], deleteRecords: [] });
  });

  it("dbaas reconciler plan - removes marked objects no record knows, and only those", () => {
    const active = rec("000000000005", "active", 10);
    const plan = planReconcile({
      records: [active],
      marked: { databases: ["client_aaaaaaaa_deadbeef", active.databaseName], roles: ["user_0000000000ff", "hold_0000000000ff", active.username] },
      now,
      graceMs,
    });
    expect(plan).toEqual({
      dropDatabases: ["client_aaaaaaaa_deadbeef"],
      dropRoles: ["hold_0000000000ff", "user_0000000000ff"],
      deleteRecords: [],
    });
  });

  it("dbaas reconciler plan - a zero grace period takes every unfinished record", () => {
    const plan = planReconcile({ records: [rec("000000000006", "provisioning", 0)], marked: { databases: [], roles: [] }, now, graceMs: 0 });
    expect(plan.deleteRecords).toEqual(["id-000000000006"]);
  });
});

describe("dbaas faults", () => {
  const err = (code?: string, message = "x") => Object.assign(new Error(message), code ? { code } : {});
  it.each<[string, Error, boolean, boolean, boolean]>([
    // name, error, unavailable, transient, never sent
    ["connection refused", err("ECONNREFUSED"), true, true, true],
    ["connection reset", err("ECONNRESET"), true, true, false],
    ["server shutting down", err("57P01"), true, true, false],
    ["too many connections", err("53300"), true, true, false],
    ["connection exception class", err("08006"), true, true, false],
    ["pool connect timeout", err(undefined, "timeout exceeded when trying to connect"), true, true, true],
    ["connection terminated", err(undefined, "Connection terminated unexpectedly"), true, true, false],
    ["template in use", err("55006"), false, true, false],
    ["deadlock", err("40P01"), false, true, false],
    ["lock timeout", err("55P03"), false, true, false],
    ["permission denied", err("42501"), false, false, false],
    ["duplicate role", err("42710"), false, false, false],
    ["a plain bug", new TypeError("x is undefined"), false, false, false],
  ])("dbaas faults - %s", (_name, error, unavailable, transient, sent) => {
    expect(isUnavailable(error)).toBe(unavailable);
    expect(isTransient(error)).toBe(transient);
    expect(neverSent(error)).toBe(sent);
  });

  it("dbaas faults - retries transient faults with backoff, then gives up", async () => {
    const waits: number[] = [];
    const sleep = async (ms: number) => void waits.push(ms);
    let calls = 0;
    await expect(
      retryTransient(
        async (attempt) => {
          calls++;
          if (attempt < 3) throw err("40P01");
          return "done";
        },
        { sleep },
      ),
    ).resolves.toBe("done");
    expect(calls).toBe(3);
    expect(waits).toEqual([50, 100]);

    calls = 0;
    await expect(retryTransient(async () => (calls++, Promise.reject(err("55006"))), { attempts: 4, sleep })).rejects.toMatchObject({ code: "55006" });
    expect(calls).toBe(4);
  });

  it("dbaas faults - does not retry what is not transient", async () => {
    let calls = 0;
    await expect(retryTransient(async () => (calls++, Promise.reject(err("42501"))), { sleep: async () => undefined })).rejects.toMatchObject({
      code: "42501",
    });
    expect(calls).toBe(1);
  });
});
