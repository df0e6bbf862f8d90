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
 * LOGIN with what its tenant role can do and nothing more: a member of it, its sessions starting
 * as it (so what the job creates belongs to the owner, and a freeze's rights hold for it too),
 * the tenant's temporary-file cap, and a password that expires by itself at `validUntil` should
 * every revocation fail. NOINHERIT, with CONNECT on its database only: after SET ROLE NONE it can
 * create nothing of its own (schema public and TEMPORARY are the tenant's alone), so nothing it
 * owns escapes a freeze or blocks DROP ROLE.
 */
export function createJobRoleSql(role: string, tenant: TenantRef, opts: { verifier: string; validUntil: Date; tempFileLimitMb: number }): string {
  if (!VERIFIER_PATTERN.test(opts.verifier)) throw new Error("Refusing a password that is not a SCRAM verifier");
  const until = opts.validUntil.toISOString();
  if (!ISO_INSTANT.test(until)) throw new Error(`Invalid expiry ${until}`);
  if (!Number.isInteger(opts.tempFileLimitMb) || opts.tempFileLimitMb < 1) throw new Error(`Invalid temp_file_limit ${opts.tempFileLimitMb}`);
  const job = ident("job", role);
  const owner = ident("user", tenant.username);
  return `CREATE ROLE ${job} LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
            CONNECTION LIMIT ${JOB_ROLE_CONNECTIONS} PASSWORD ${literal(opts.verifier)} VALID UNTIL ${literal(until)};
          GRANT ${owner} TO ${job};
          GRANT CONNECT ON DATABASE ${ident("database", tenant.databaseName)} TO ${job};
          ALTER ROLE ${job} SET role = ${literal(tenant.username)};
          ALTER ROLE ${job} SET temp_file_limit = '${opts.tempFileLimitMb}MB'`;
}

/** No new logins from here on (the sessions are ended next). */
export const blockJobRoleSql = (role: string): string => `ALTER ROLE ${ident("job", role)} NOLOGIN`;

/**
 * Inside its database: its CONNECT goes, and (should it own anything after all) what it owns passes
 * to the tenant role, so DROP ROLE finds nothing depending on it.
 */
export const releaseJobRoleSql = (role: string, tenant: TenantRef): string =>
  `REASSIGN OWNED BY ${ident("job", role)} TO ${ident("user", tenant.username)};
   DROP OWNED BY ${ident("job", role)}`;

export const dropJobRoleSql = (role: string): string => `DROP ROLE IF EXISTS ${ident("job", role)}`;
