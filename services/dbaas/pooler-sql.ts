/**
 * What the pooled endpoint (PgBouncer, scripts/setup/tenant-pgbouncer.sh) needs inside each client
 * database: PgBouncer 1.18 runs its auth_query in the database a client connects to, as the pooler
 * role (DBAAS_POOLER_ROLE), to fetch the client role's SCRAM verifier. The pooler role has LOGIN
 * and nothing else: CONNECT on client databases, USAGE on dbaas_guard and EXECUTE on this one
 * function. The function reads pg_authid as its owner (the admin: only a superuser may), returns
 * only tenant and job roles that may log in now, never a superuser's, the admin's or its own, and
 * resolves nothing by the caller's search_path.
 */
import { GUARD_SCHEMA } from "./extension-sql";

const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function checkPoolerRole(role: string): string {
  if (!ROLE_NAME.test(role) || /^(user|job|hold)_/.test(role)) throw new Error(`Invalid pooler role ${JSON.stringify(role)}`);
  return role;
}

/** Run in the client database as the admin; the pooler role must exist (a missing one fails the statement). */
export function poolerLookupSql(poolerRole: string): string {
  const role = `"${checkPoolerRole(poolerRole)}"`;
  return `CREATE OR REPLACE FUNCTION ${GUARD_SCHEMA}.pooler_lookup(p_user text, OUT usename text, OUT passwd text) RETURNS SETOF record
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $lookup$
      SELECT a.rolname::text, a.rolpassword FROM pg_catalog.pg_authid a
       WHERE a.rolname OPERATOR(pg_catalog.=) p_user
         AND (a.rolname OPERATOR(pg_catalog.~) '^user_[0-9a-f]{12}$' OR a.rolname OPERATOR(pg_catalog.~) '^job_[0-9a-f]{16}$')
         AND a.rolcanlogin AND NOT a.rolsuper AND NOT a.rolreplication AND NOT a.rolbypassrls
         AND (a.rolvaliduntil IS NULL OR a.rolvaliduntil OPERATOR(pg_catalog.>) pg_catalog.now())
      $lookup$;
    REVOKE ALL ON FUNCTION ${GUARD_SCHEMA}.pooler_lookup(text) FROM PUBLIC;
    GRANT USAGE ON SCHEMA ${GUARD_SCHEMA} TO ${role};
    GRANT EXECUTE ON FUNCTION ${GUARD_SCHEMA}.pooler_lookup(text) TO ${role};
    DO $connect$ BEGIN EXECUTE pg_catalog.format('GRANT CONNECT ON DATABASE %I TO ${role}', pg_catalog.current_database()); END $connect$`;
}
