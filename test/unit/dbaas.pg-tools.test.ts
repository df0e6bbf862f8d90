import { libpqEnv, parseMajor, tenantToc, toolsMismatch } from "../../services/dbaas/pg-tools";
import { parseExtensions } from "../../services/dbaas/settings";
import { extensionGuardSql } from "../../services/dbaas/extension-sql";
import { checkPoolerRole } from "../../services/dbaas/pooler-sql";
import { pinnedConnection } from "../../services/dbaas/search-path";
import { setPasswordSql } from "../../services/dbaas/tenant-sql";
import { parseSslMode } from "../../services/dbaas/settings";

describe("dbaas pg tools", () => {
  it.each([
    ["Debian's pg_dump", "pg_dump (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)\n", 15],
    ["a release candidate", "pg_restore (PostgreSQL) 17rc1", 17],
    ["an old three-part version", "pg_dump (PostgreSQL) 9.6.24", 9],
    ["nothing", "", undefined],
    ["another program", "bash: pg_dump: command not found", undefined],
  ])("dbaas pg tools - the major version of %s", (_name, text, major) => expect(parseMajor(text)).toBe(major));

  it.each([
    ["both of the server's major", 15, { pg_dump: 15, pg_restore: 15 }, undefined],
    ["pg_dump older than the server", 16, { pg_dump: 15, pg_restore: 16 }, /pg_dump is version 15/],
    [
      "pg_dump newer than the server (its dumps may not restore there)",
      15,
      { pg_dump: 16, pg_restore: 16 },
      /pg_dump is version 16 and pg_restore is version 16/,
    ],
    ["pg_restore missing", 15, { pg_dump: 15, pg_restore: undefined }, /pg_restore is missing.*postgresql-client-15/],
  ] as const)("dbaas pg tools - %s", (_name, server, tools, expected) => {
    const reason = toolsMismatch(server, tools);
    if (expected === undefined) expect(reason).toBeUndefined();
    else expect(reason).toMatch(expected);
  });

  it("dbaas pg tools - credentials go to the environment (never argv), sslmode kept, the database chosen by dbaas", () => {
    expect(libpqEnv("postgresql://ci%40admin:p%2Fss@db.example.com:5433/postgres?sslmode=require", "client_ab_12")).toEqual({
      PGHOST: "db.example.com",
      PGPORT: "5433",
      PGUSER: "ci@admin",
      PGPASSWORD: "p/ss",
      PGDATABASE: "client_ab_12",
      PGCONNECT_TIMEOUT: "10",
      PGOPTIONS: "-c search_path=pg_catalog,pg_temp",
      PGSSLMODE: "require",
    });
    expect(libpqEnv("postgresql://u:p@h/postgres", "d")).not.toHaveProperty("PGSSLMODE");
  });

  it("dbaas pg tools - every tenant-server session has search_path pinned at connect, after any options of the URL", () => {
    expect(pinnedConnection("postgresql://u:p@h:5433/postgres?sslmode=require")).toEqual({
      connectionString: "postgresql://u:p@h:5433/postgres?sslmode=require",
      options: "-c search_path=pg_catalog,pg_temp",
    });
    // The URL's options would replace a separate `options` in node-postgres: merged, the pin last (the last -c wins).
    const merged = pinnedConnection("postgresql://u:p@h/postgres?options=-c%20search_path%3Dpublic");
    expect(merged).toEqual({ connectionString: "postgresql://u:p@h/postgres", options: "-c search_path=public -c search_path=pg_catalog,pg_temp" });
    expect(libpqEnv("postgresql://u:p@h/postgres?options=-c%20work_mem%3D8MB", "d").PGOPTIONS).toBe("-c work_mem=8MB -c search_path=pg_catalog,pg_temp");
  });

  it("dbaas pg tools - a rotated password reaches the server only as a SCRAM verifier of a generated role", () => {
    const verifier = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy";
    expect(setPasswordSql("user_0123456789ab", verifier)).toBe(`ALTER ROLE "user_0123456789ab" PASSWORD '${verifier}'`);
    expect(() => setPasswordSql("user_0123456789ab", "plain-password")).toThrow(/not a SCRAM verifier/);
    expect(() => setPasswordSql('postgres"; --', verifier)).toThrow(/breaks its pattern/);
  });

  it.each([
    ["unset", undefined, "auto"],
    ["empty", "", "auto"],
    ["auto", "AUTO", "auto"],
    ["off", "off", "off"],
    ["require", "require", "require"],
    ["verify-full", " verify-full ", "verify-full"],
  ])("dbaas pg tools - DBAAS_SSLMODE %s", (_name, raw, mode) => expect(parseSslMode(raw)).toBe(mode));

  it("dbaas pg tools - DBAAS_SSLMODE refuses anything else, naming what it takes", () => {
    expect(() => parseSslMode("yes")).toThrow(
      /DBAAS_SSLMODE must be "auto" \(the default\), "off" or one of disable, allow, prefer, require, verify-ca, verify-full, got "yes"/,
    );
  });

  it("dbaas pg tools - a restore leaves out the source's platform objects only", () => {
    const toc = [
      "215; 2615 16390 SCHEMA - dbaas_guard ci_admin",
      "216; 1255 16391 FUNCTION dbaas_guard allowed_extensions() ci_admin",
      "217; 1255 16392 FUNCTION dbaas_guard pooler_lookup(text) ci_admin",
      "3340; 3466 16393 EVENT TRIGGER - dbaas_allowed_extensions ci_admin",
      "2; 3079 16400 EXTENSION - citext ",
      "218; 1259 16410 TABLE public notes user_0123456789ab",
      "219; 1259 16411 TABLE public dbaas_guard user_0123456789ab",
      "3341; 0 16410 TABLE DATA public notes user_0123456789ab",
    ].join("\n");
    expect(tenantToc(toc).split("\n")).toEqual([
      "2; 3079 16400 EXTENSION - citext ",
      "218; 1259 16410 TABLE public notes user_0123456789ab",
      "219; 1259 16411 TABLE public dbaas_guard user_0123456789ab",
      "3341; 0 16410 TABLE DATA public notes user_0123456789ab",
    ]);
  });

  it("dbaas pg tools - DBAAS_EXTENSIONS: names only, default list, none; guard and pooler names checked", () => {
    expect(parseExtensions({})).toContain("pg_trgm");
    expect(parseExtensions({ DBAAS_EXTENSIONS: "citext, uuid-ossp" })).toEqual(["citext", "uuid-ossp"]);
    expect(parseExtensions({ DBAAS_EXTENSIONS: "none" })).toEqual([]);
    expect(() => parseExtensions({ DBAAS_EXTENSIONS: "citext,x'; DROP" })).toThrow(/DBAAS_EXTENSIONS/);
    expect(() => extensionGuardSql(["bad'name"])).toThrow(/Invalid extension/);
    expect(extensionGuardSql([])).toMatch(/ARRAY\[\]::text\[\]/);
    expect(() => checkPoolerRole('x" SUPERUSER')).toThrow();
    expect(() => checkPoolerRole("user_0123456789ab")).toThrow();
  });
});
