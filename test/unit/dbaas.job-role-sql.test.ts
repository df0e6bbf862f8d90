/** The SQL of GPU jobs' database roles (services/dbaas/job-role-sql.ts): generated names only, checked and quoted. Pure, no server. */
import { blockJobRoleSql, createJobRoleSql, dropJobRoleSql, releaseJobRoleSql } from "../../services/dbaas/job-role-sql";
import { generateJobRoleName, kindOf } from "../../services/dbaas/naming";

const tenant = { databaseName: "client_f3921d0e_0badcafe", username: "user_a1b2c3d4e5f6" };
const role = "job_0123456789abcdef";
const verifier = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy";
const validUntil = new Date("2026-11-27T13:00:00.000Z");

describe("dbaas job role sql", () => {
  it("dbaas job role sql - a login of its own, a member of the tenant role, starting as it, CONNECT on its database, expiring by itself", () => {
    const text = createJobRoleSql(role, tenant, { verifier, validUntil, tempFileLimitMb: 1024 });
    expect(text).toMatch(
      /^CREATE ROLE "job_0123456789abcdef" LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS\s+CONNECTION LIMIT 4 /,
    );
    expect(text).toContain("VALID UNTIL '2026-11-27T13:00:00.000Z'");
    expect(text).toContain('GRANT "user_a1b2c3d4e5f6" TO "job_0123456789abcdef"');
    expect(text).toContain('GRANT CONNECT ON DATABASE "client_f3921d0e_0badcafe" TO "job_0123456789abcdef"');
    expect(text).toContain(`ALTER ROLE "job_0123456789abcdef" SET role = 'user_a1b2c3d4e5f6'`);
    expect(text).toContain(`ALTER ROLE "job_0123456789abcdef" SET temp_file_limit = '1024MB'`);
    expect(blockJobRoleSql(role)).toBe('ALTER ROLE "job_0123456789abcdef" NOLOGIN');
    expect(releaseJobRoleSql(role, tenant)).toMatch(/REASSIGN OWNED BY "job_0123456789abcdef" TO "user_a1b2c3d4e5f6";\s+DROP OWNED BY "job_0123456789abcdef"/);
    expect(dropJobRoleSql(role)).toBe('DROP ROLE IF EXISTS "job_0123456789abcdef"');
    expect(kindOf(generateJobRoleName())).toBe("job");
  });

  const ok = { verifier, validUntil, tempFileLimitMb: 10 };
  it.each<[string, () => string]>([
    ["a role that is not a job role", () => createJobRoleSql("user_a1b2c3d4e5f6", tenant, ok)],
    ["a role name with a quote", () => createJobRoleSql('job_0123"; DROP ROLE x; --', tenant, ok)],
    ["a tenant that is not a tenant role", () => createJobRoleSql(role, { ...tenant, username: "postgres" }, ok)],
    ["a foreign database", () => createJobRoleSql(role, { ...tenant, databaseName: "postgres" }, ok)],
    ["a plaintext password", () => createJobRoleSql(role, tenant, { ...ok, verifier: "hunter2" })],
    ["an invalid expiry", () => createJobRoleSql(role, tenant, { ...ok, validUntil: new Date(Number.NaN) })],
    ["a zero temp_file_limit", () => createJobRoleSql(role, tenant, { ...ok, tempFileLimitMb: 0 })],
    ["dropping a tenant role as a job role", () => dropJobRoleSql("user_a1b2c3d4e5f6")],
    ["blocking a superuser", () => blockJobRoleSql("postgres")],
  ])("dbaas job role sql - refuses %s", (_name, build) => {
    expect(build).toThrow();
  });
});
