/**
 * dbaas guards, pure: which tenant servers are refused, how an account's connections are split
 * and when the server has room, when the quota is watched closely, and what the reconciler takes
 * from a crashed process. No server.
 */
import { connectionRoom, ConnectionPolicy, splitConnections, tooManyDatabases } from "../../services/dbaas/connections";
import { isNearQuota, MIB } from "../../services/dbaas/quota";
import { planReconcile } from "../../services/dbaas/reconciler";
import { GuardFacts, refusalReason, TenantServerRefused, verifyTenantServer } from "../../services/dbaas/server-guard";
import { createProbeRoleSql } from "../../services/dbaas/password-probe";
import {
  catalogLevelSql,
  hiddenAt,
  NAME_FUNCTIONS,
  NAME_RELATIONS,
  prepareSchemaSql,
  SESSION_FUNCTIONS,
  SESSION_RELATIONS,
  setConnectionLimitsSql,
} from "../../services/dbaas/tenant-sql";
import { CATALOG_LEVELS, CatalogLevel, parseCatalogLevel, parseDbaasSettings } from "../../services/dbaas/settings";

describe("dbaas server guard", () => {
  const facts = (over: Partial<GuardFacts>): GuardFacts => ({
    probe: { connected: false, code: "28P01", message: "password authentication failed" },
    tenantSystemId: "1",
    stateSystemId: "2",
    allowStateServer: false,
    ...over,
  });
  it.each<[string, Partial<GuardFacts>, RegExp | undefined]>([
    ["a wrong password refused (28P01), another cluster: accepted", {}, undefined],
    ["rejected outright by pg_hba (28000): accepted", { probe: { connected: false, code: "28000", message: "no pg_hba.conf entry" } }, undefined],
    ["the wrong password let in: trust", { probe: { connected: true } }, /wrong password/],
    ["let in, then no CONNECT right (42501): trust", { probe: { connected: false, code: "42501", message: "permission denied" } }, /wrong password/],
    ["let in, then too many connections (53300): trust", { probe: { connected: false, code: "53300", message: "too many" } }, /wrong password/],
    ["an unexpected failure proves nothing", { probe: { connected: false, code: "XX000", message: "odd" } }, /not proven/],
    ["the state server's cluster", { tenantSystemId: "7", stateSystemId: "7" }, /state server/],
    ["the state server with the opt-in", { tenantSystemId: "7", stateSystemId: "7", allowStateServer: true }, undefined],
    [
      "the state server with the opt-in but trust",
      { tenantSystemId: "7", stateSystemId: "7", allowStateServer: true, probe: { connected: true } },
      /wrong password/,
    ],
  ])("dbaas server guard - %s", (_name, over, expected) => {
    const reason = refusalReason(facts(over));
    if (expected) expect(reason).toMatch(expected);
    else expect(reason).toBeUndefined();
  });

  it("dbaas server guard - an unreachable server is checked later; a refused one throws", async () => {
    const down = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const io = (probe: () => Promise<never> | Promise<{ connected: true }>) => ({
      probeWrongPassword: probe,
      tenantSystemId: async () => "1",
      stateSystemId: async () => "2",
    });
    await expect(
      verifyTenantServer(
        io(() => Promise.reject(down)),
        false,
      ),
    ).resolves.toBe(false);
    await expect(
      verifyTenantServer(
        io(async () => ({ connected: true })),
        false,
      ),
    ).rejects.toBeInstanceOf(TenantServerRefused);
  });
});

describe("dbaas connections", () => {
  const policy: ConnectionPolicy = { perAccount: 20, perDatabase: 20, reserved: 20 };
  it.each<[string, ConnectionPolicy, number, number[]]>([
    ["one database takes the whole budget", policy, 1, [20]],
    ["split evenly", policy, 4, [5, 5, 5, 5]],
    ["the remainder to the oldest", { ...policy, perAccount: 6 }, 5, [2, 1, 1, 1, 1]],
    ["capped per database", { ...policy, perDatabase: 7 }, 2, [7, 7]],
    ["never below one", { ...policy, perAccount: 2 }, 3, [1, 1, 1]],
    ["none", policy, 0, []],
  ])("dbaas connections - %s", (_name, p, n, expected) => {
    expect(splitConnections(p, n)).toEqual(expected);
  });

  it("dbaas connections - at most one database per connection of the budget", () => {
    expect(tooManyDatabases({ ...policy, perAccount: 3 }, 3)).toBe(false);
    expect(tooManyDatabases({ ...policy, perAccount: 3 }, 4)).toBe(true);
  });

  it.each<[string, { allotted: number; own: number }, number, boolean]>([
    ["a new account that fits", { allotted: 100, own: 0 }, 1, true],
    ["a new account one connection too many", { allotted: 138, own: 0 }, 1, false],
    ["an existing account's new database re-splits its own budget", { allotted: 157, own: 20 }, 3, true],
    ["the reserves are kept exactly", { allotted: 137, own: 0 }, 1, true],
  ])("dbaas connections - server room: %s", (_name, figures, databases, fits) => {
    const capacity = { max_connections: 180, superuser_reserved: 3, ...figures };
    const refusal = connectionRoom(policy, capacity, databases);
    if (fits) expect(refusal).toBeUndefined();
    else expect(refusal).toMatch(/max_connections 180, 3 reserved for superusers, 20 for the platform/);
  });
});

describe("dbaas quota watch", () => {
  it("dbaas quota watch - near means over 80 % and still writable", () => {
    expect(isNearQuota({ storageBytes: 8 * MIB, maxStorageMb: 10, readOnly: false })).toBe(false);
    expect(isNearQuota({ storageBytes: 8 * MIB + 1, maxStorageMb: 10, readOnly: false })).toBe(true);
    expect(isNearQuota({ storageBytes: 9 * MIB, maxStorageMb: 10, readOnly: true })).toBe(false);
  });
});

describe("dbaas reconciler and crashed owners", () => {
  const now = new Date("2030-01-01T12:00:00Z");
  const rec = (hex: string, ownerAlive: boolean | undefined, status: "provisioning" | "active" = "provisioning") => ({
    id: `id-${hex}`,
    databaseName: `client_aaaaaaaa_${hex.slice(-8)}`,
    username: `user_${hex}`,
    status,
    updatedAt: new Date(now.getTime() - 1000),
    ...(ownerAlive === undefined ? {} : { ownerAlive }),
  });
  it("dbaas reconciler - a dead owner's record goes at once; a live owner's and an ownerless recent one stay", () => {
    const plan = planReconcile({
      records: [rec("000000000001", false), rec("000000000002", true), rec("000000000003", undefined), rec("000000000004", false, "active")],
      marked: { databases: [], roles: [] },
      now,
      graceMs: 300_000,
    });
    expect(plan.deleteRecords).toEqual(["id-000000000001"]);
    expect(plan.dropRoles).toEqual(["hold_000000000001", "user_000000000001"]);
  });
});

describe("dbaas guard SQL", () => {
  const ref = { databaseName: "client_aaaaaaaa_00000001", username: "user_000000000001" };
  it("dbaas guard SQL - names and numbers are checked before they reach SQL", () => {
    expect(() => setConnectionLimitsSql([{ username: "user_x'; DROP ROLE postgres; --", limit: 2 }])).toThrow();
    expect(() => setConnectionLimitsSql([{ username: ref.username, limit: 0 }])).toThrow();
    expect(() => createProbeRoleSql("postgres", "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy")).toThrow();
    expect(() => createProbeRoleSql("ci_probe_000000000001", "plain")).toThrow();
  });

  it("dbaas guard SQL - the catalog is closed only when asked", () => {
    expect(prepareSchemaSql(ref)).not.toMatch(/pg_database|pg_stat_activity/);
    expect(prepareSchemaSql(ref, "off")).not.toMatch(/pg_database|pg_stat_activity/);
    expect(prepareSchemaSql(ref, "sessions")).toMatch(/'pg_stat_get_activity\(integer\)'/);
    expect(prepareSchemaSql(ref, "all")).toMatch(/'pg_database'/);
    expect(prepareSchemaSql(ref, "all")).toMatch(/'pg_stat_get_activity\(integer\)'/);
  });

  /** The names in the revoking loops (relations, then functions) of catalogLevelSql, and in the granting ones. */
  const loops = (level: CatalogLevel) => {
    const arrays = [...catalogLevelSql(level).matchAll(/FOREACH n IN ARRAY ARRAY\[([^\]]*)\]::text\[\]/g)].map((m) =>
      [...m[1].matchAll(/'([^']+)'/g)].map((q) => q[1]),
    );
    expect(arrays).toHaveLength(4);
    return { revoked: [...arrays[0], ...arrays[2]], granted: [...arrays[1], ...arrays[3]] };
  };

  it("dbaas guard SQL - sessions hides other tenants' sessions and activity, never the names pg_dump and psql \\l read", () => {
    const { revoked, granted } = loops("sessions");
    for (const name of [
      "pg_stat_activity",
      "pg_prepared_xacts",
      "pg_stat_replication",
      "pg_stat_subscription",
      "pg_stat_ssl",
      "pg_stat_gssapi",
      "pg_replication_slots",
      "pg_stat_replication_slots",
      "pg_stat_wal_receiver",
      "pg_stat_progress_vacuum",
      "pg_stat_progress_copy",
      "pg_stat_database",
      "pg_stat_database_conflicts",
      "pg_stat_get_activity(integer)",
      "pg_stat_get_progress_info(text)",
      "pg_stat_get_backend_idset()",
      "pg_stat_get_backend_userid(integer)",
      "pg_stat_get_backend_activity(integer)",
    ]) {
      expect([name, revoked]).toEqual([name, expect.arrayContaining([name])]);
    }
    for (const name of [
      "pg_database",
      "pg_roles",
      "pg_user",
      "pg_group",
      "pg_auth_members",
      "pg_db_role_setting",
      "pg_shdepend",
      "pg_shdescription",
      "pg_shseclabel",
      "pg_seclabels",
      "shobj_description(oid, name)",
    ]) {
      expect([name, revoked]).toEqual([name, expect.not.arrayContaining([name])]);
      expect([name, granted]).toEqual([name, expect.arrayContaining([name])]); // back to the default where `all` had it hidden
    }
  });

  it("dbaas guard SQL - all hides the names too, off hides nothing; each level gives back what it does not hide", () => {
    const all = loops("all");
    expect(all.revoked).toEqual(expect.arrayContaining([...SESSION_RELATIONS, ...SESSION_FUNCTIONS, ...NAME_RELATIONS, ...NAME_FUNCTIONS]));
    expect(all.granted).toEqual([]);
    const off = loops("off");
    expect(off.revoked).toEqual([]);
    expect(off.granted.sort()).toEqual([...SESSION_RELATIONS, ...SESSION_FUNCTIONS, ...NAME_RELATIONS, ...NAME_FUNCTIONS].sort());
    for (const level of CATALOG_LEVELS) {
      const { revoked, granted } = loops(level);
      expect([...revoked, ...granted].sort()).toEqual([...SESSION_RELATIONS, ...SESSION_FUNCTIONS, ...NAME_RELATIONS, ...NAME_FUNCTIONS].sort());
      expect(hiddenAt(level).relations.length + hiddenAt(level).functions.length).toBe(revoked.length);
    }
    expect(() => catalogLevelSql("everything" as CatalogLevel)).toThrow();
  });
});

describe("dbaas catalog level (DBAAS_HIDE_CATALOG)", () => {
  it.each<[string | undefined, CatalogLevel]>([
    [undefined, "sessions"],
    ["", "sessions"],
    ["sessions", "sessions"],
    ["all", "all"],
    ["true", "all"], // the former default: everything hidden
    ["off", "off"],
    ["false", "off"],
    [" ALL ", "all"],
    ["Off", "off"],
  ])("dbaas catalog level - %j is %s", (raw, level) => {
    expect(parseCatalogLevel(raw)).toBe(level);
  });

  it.each(["yes", "1", "0", "none", "session", "names", "all,sessions"])("dbaas catalog level - %j refuses to start with the accepted values named", (raw) => {
    expect(() => parseCatalogLevel(raw)).toThrow(/DBAAS_HIDE_CATALOG must be "sessions" \(the default\), "all" \(or "true"\) or "off" \(or "false"\)/);
  });

  it("dbaas catalog level - the service's settings read DBAAS_HIDE_CATALOG", () => {
    expect(parseDbaasSettings({}).hideCatalog).toBe("sessions");
    expect(parseDbaasSettings({ DBAAS_HIDE_CATALOG: "true" }).hideCatalog).toBe("all");
    expect(() => parseDbaasSettings({ DBAAS_HIDE_CATALOG: "bogus" }).hideCatalog).toThrow(/got "bogus"/);
  });
});
