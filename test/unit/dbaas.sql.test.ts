/** dbaas SQL builders: every identifier checked and quoted, nothing else inlined. Pure, no server. */
import * as sql from "../../services/dbaas/tenant-sql";

const ref = { databaseName: "client_f3921d0e_0badcafe", username: "user_a1b2c3d4e5f6" };
const marker = "ci-platform:dbaas:1b4e28ba-2fa1-11d2-883f-0016d3cca427";
const verifier = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy";

describe("dbaas sql", () => {
  it("dbaas sql - statements quote the generated names and carry the marker", () => {
    expect(sql.createRoleSql(ref, verifier, 20, marker)).toMatch(
      /^CREATE ROLE "user_a1b2c3d4e5f6" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS\s+CONNECTION LIMIT 20 PASSWORD 'SCRAM-SHA-256\$4096:[^']+';\s+COMMENT ON ROLE "user_a1b2c3d4e5f6" IS 'ci-platform:dbaas:1b4e28ba-2fa1-11d2-883f-0016d3cca427'$/,
    );
    expect(sql.createDatabaseSql(ref)).toBe('CREATE DATABASE "client_f3921d0e_0badcafe" TEMPLATE template0');
    expect(sql.secureDatabaseSql(ref, marker)).toContain('REVOKE CONNECT, TEMPORARY ON DATABASE "client_f3921d0e_0badcafe" FROM PUBLIC');
    expect(sql.freezeSql(ref)).toContain('REASSIGN OWNED BY "user_a1b2c3d4e5f6" TO "hold_a1b2c3d4e5f6"');
    expect(sql.thawSql(ref, true)).toContain('REASSIGN OWNED BY "hold_a1b2c3d4e5f6" TO "user_a1b2c3d4e5f6"');
    expect(sql.thawSql(ref, false)).not.toContain("REASSIGN");
    expect(sql.dropRolesSql(["user_a1b2c3d4e5f6", "hold_a1b2c3d4e5f6"])).toBe('DROP ROLE IF EXISTS "user_a1b2c3d4e5f6", "hold_a1b2c3d4e5f6"');
    expect(sql.dropDatabaseSql(ref.databaseName)).toBe('DROP DATABASE IF EXISTS "client_f3921d0e_0badcafe" WITH (FORCE)');
  });

  const evil = 'x"; DROP ROLE postgres; --';
  it.each<[string, () => string]>([
    ["a database name with a quote", () => sql.createDatabaseSql({ ...ref, databaseName: evil })],
    ["a username with a quote", () => sql.prepareSchemaSql({ ...ref, username: evil })],
    ["a foreign database in secure", () => sql.secureDatabaseSql({ ...ref, databaseName: "postgres" }, marker)],
    ["a marker with a quote", () => sql.secureDatabaseSql(ref, "ci-platform:dbaas:x'; DROP DATABASE y; --")],
    ["a plaintext password", () => sql.createRoleSql(ref, "hunter2", 20, marker)],
    ["a verifier with a quote", () => sql.createRoleSql(ref, "SCRAM-SHA-256$4096:a'$b:c", 20, marker)],
    ["a zero connection limit", () => sql.createRoleSql(ref, verifier, 0, marker)],
    ["a fractional connection limit", () => sql.createRoleSql(ref, verifier, 1.5, marker)],
    ["dropping a superuser", () => sql.dropRolesSql(["postgres"])],
    ["dropping template1", () => sql.dropDatabaseSql("template1")],
    ["freezing someone else", () => sql.freezeSql({ ...ref, username: "ci_admin" })],
    ["an unknown catalog level", () => sql.catalogLevelSql("names" as never)],
    ["an unknown catalog level in prepareSchema", () => sql.prepareSchemaSql(ref, "everything" as never)],
  ])("dbaas sql - refuses %s", (_name, build) => {
    expect(build).toThrow();
  });
});
