/**
 * The SQL of a GPU job's database role (issue 28; job-roles.ts runs it): a login role of its own,
 * a member of the database's tenant role, and its removal. As tenant-sql.ts: every identifier is
 * generated, checked against its pattern and quoted; the only literals are the SCRAM verifier
 * and an ISO timestamp, both pattern-checked.
 */
import { VERIFIER_PATTERN } from "./credentials";
import { ident } from "./naming";
import { literal, type TenantRef } from "./sql-text";

/** Sessions one job role may hold at once: a job's own few connections, not the account's share. */
export const JOB_ROLE_CONNECTIONS = 4;

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/;

/**
 * LOGIN with what its tenant role can do and nothing more: INHERIT its membership (CONNECT comes
 * from there), its session starts as the tenant role (objects it creates belong to the owner, so
 * the role can be dropped), the tenant's temporary-file cap, and a password that expires by
 * itself at `validUntil` should every revocation fail.
 */
export function createJobRoleSql(role: string, tenant: TenantRef, opts: { verifier: string; validUntil: Date; tempFileLimitMb: number }): string {
  if (!VERIFIER_PATTERN.test(opts.verifier)) throw new Error("Refusing a password that is not a SCRAM verifier");
  const until = opts.validUntil.toISOString();
  if (!ISO_INSTANT.test(until)) throw new Error(`Invalid expiry ${until}`);
  if (!Number.isInteger(opts.tempFileLimitMb) || opts.tempFileLimitMb < 1) throw new Error(`Invalid temp_file_limit ${opts.tempFileLimitMb}`);
  const job = ident("job", role);
  const owner = ident("user", tenant.username);
  return `CREATE ROLE ${job} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
            CONNECTION LIMIT ${JOB_ROLE_CONNECTIONS} PASSWORD ${literal(opts.verifier)} VALID UNTIL ${literal(until)};
          GRANT ${owner} TO ${job};
          ALTER ROLE ${job} SET role = ${literal(tenant.username)};
          ALTER ROLE ${job} SET temp_file_limit = '${opts.tempFileLimitMb}MB'`;
}

/** No new logins from here on (the sessions are ended next). */
export const blockJobRoleSql = (role: string): string => `ALTER ROLE ${ident("job", role)} NOLOGIN`;

/**
 * Inside its database: whatever the role created under its own name (after RESET ROLE) passes to
 * the tenant role, and any right granted to it goes, so DROP ROLE finds nothing depending on it.
 */
export const releaseJobRoleSql = (role: string, tenant: TenantRef): string =>
  `REASSIGN OWNED BY ${ident("job", role)} TO ${ident("user", tenant.username)};
   DROP OWNED BY ${ident("job", role)}`;

export const dropJobRoleSql = (role: string): string => `DROP ROLE IF EXISTS ${ident("job", role)}`;
