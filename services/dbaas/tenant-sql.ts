/**
 * The SQL text dbaas sends to the tenant server, built from generated names only: each builder
 * checks every identifier against its pattern and quotes it. The only literals inlined are the
 * pattern-checked names, marker and SCRAM verifier (utility statements take no bind parameters).
 */
import { VERIFIER_PATTERN } from "./credentials";
import { checkIdentifier, ident, kindOf } from "./naming";
import { catalogLevelSql } from "./catalog-sql";
import type { CatalogLevel } from "./settings";
import { checkMarker, literal, LO_CREATORS, type TenantRef } from "./sql-text";

// The catalog levels' and the freeze's SQL have their own modules; they are part of what dbaas sends, so they are reachable from here too.
export { catalogLevelSql, hiddenAt, NAME_FUNCTIONS, NAME_RELATIONS, SESSION_FUNCTIONS, SESSION_RELATIONS } from "./catalog-sql";
export { freezeSql, frozenWritePathsSql, holdRoleSql, lockOutSql, thawSql } from "./freeze-sql";
export { checkMarker, type TenantRef } from "./sql-text";

/** LOGIN and nothing more, a connection limit, the password as a verifier, and the marker. */
export function createRoleSql(ref: TenantRef, verifier: string, connectionLimit: number, marker: string, tempFileLimitMb?: number): string {
  checkVerifier(verifier);
  if (!Number.isInteger(connectionLimit) || connectionLimit < 1) throw new Error(`Invalid connection limit ${connectionLimit}`);
  const user = ident("user", ref.username);
  return `CREATE ROLE ${user} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS
            CONNECTION LIMIT ${connectionLimit} PASSWORD ${literal(verifier)};
          COMMENT ON ROLE ${user} IS ${literal(checkMarker(marker))}${tempFileLimitMb ? `;\n${tempFileLimitSql(ref.username, tempFileLimitMb)}` : ""}`;
}

/** A new password for an existing tenant role, as a verifier (the plaintext never reaches the server). */
export const setPasswordSql = (username: string, verifier: string) => `ALTER ROLE ${ident("user", username)} PASSWORD ${literal(checkVerifier(verifier))}`;

function checkVerifier(verifier: string): string {
  if (!VERIFIER_PATTERN.test(verifier)) throw new Error("Refusing a password that is not a SCRAM verifier");
  return verifier;
}

/** template0: nobody can be connected to it (unlike template1), so it is never "in use". */
export const createDatabaseSql = (ref: TenantRef) => `CREATE DATABASE ${ident("database", ref.databaseName)} TEMPLATE template0`;

/** Marks the database, closes it to PUBLIC, opens it to its tenant, and measures it. */
export function secureDatabaseSql(ref: TenantRef, marker: string): string {
  const db = ident("database", ref.databaseName);
  const user = ident("user", ref.username);
  return `COMMENT ON DATABASE ${db} IS ${literal(checkMarker(marker))};
          REVOKE CONNECT, TEMPORARY ON DATABASE ${db} FROM PUBLIC;
          GRANT CONNECT, TEMPORARY, CREATE ON DATABASE ${db} TO ${user};
          SELECT pg_catalog.pg_database_size(${literal(ref.databaseName)}) AS bytes`;
}

/**
 * Inside the new database: only the tenant may use (and create in) schema public; at a catalog
 * level other than `off`, the catalog views and functions that level hides are closed to it too
 * (catalog rights are per database, so this holds where the tenant connects).
 */
export function prepareSchemaSql(ref: TenantRef, catalogLevel: CatalogLevel = "off"): string {
  const user = ident("user", ref.username);
  return `REVOKE ALL ON SCHEMA public FROM PUBLIC;
          GRANT USAGE, CREATE ON SCHEMA public TO ${user};
          REVOKE EXECUTE ON FUNCTION ${LO_CREATORS} FROM PUBLIC;
          GRANT EXECUTE ON FUNCTION ${LO_CREATORS} TO ${user}${catalogLevel === "off" ? "" : `;\n${catalogLevelSql(catalogLevel)}`}`;
}

/** New connection limits for tenant roles; roles that do not exist (yet, or any more) are skipped. */
export function setConnectionLimitsSql(limits: Array<{ username: string; limit: number }>): string {
  const pairs = limits.map(({ username, limit }) => {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`Invalid connection limit ${limit}`);
    return `(${literal(checkIdentifier("user", username))}, ${limit})`;
  });
  if (!pairs.length) return "SELECT 1";
  return `DO $limits$
    DECLARE r record;
    BEGIN
      FOR r IN SELECT l.name, l.n FROM (VALUES ${pairs.join(", ")}) AS l(name, n) JOIN pg_roles ON rolname = l.name WHERE rolconnlimit <> l.n LOOP
        EXECUTE pg_catalog.format('ALTER ROLE %I CONNECTION LIMIT %s', r.name, r.n);
      END LOOP;
    END
    $limits$`;
}

/** No new logins for the tenant while it is frozen (superusers, dbaas itself, are not counted). */
export const blockLoginsSql = (username: string): string => `ALTER ROLE ${ident("user", username)} CONNECTION LIMIT 0`;

/** The limit from before blockLoginsSql, only if still 0: a rebalance meanwhile set a newer share. */
export function restoreLoginsSql(username: string, limit: number): string {
  if (!Number.isInteger(limit) || limit < -1 || limit === 0) throw new Error(`Invalid connection limit ${limit}`);
  const name = literal(checkIdentifier("user", username));
  return `DO $logins$
    BEGIN
      IF (SELECT rolconnlimit FROM pg_roles WHERE rolname = ${name}) = 0 THEN
        EXECUTE pg_catalog.format('ALTER ROLE %I CONNECTION LIMIT %s', ${name}, ${limit});
      END IF;
    END
    $logins$`;
}

/** The server's connection figures, and the limits already handed to tenant roles (all accounts, and `own`). */
export const CONNECTION_CAPACITY_SQL = `SELECT pg_catalog.current_setting('max_connections')::int AS max_connections,
         pg_catalog.current_setting('superuser_reserved_connections')::int AS superuser_reserved,
         coalesce(pg_catalog.sum(rolconnlimit) FILTER (WHERE rolconnlimit > 0), 0)::int AS allotted,
         coalesce(pg_catalog.sum(rolconnlimit) FILTER (WHERE rolconnlimit > 0 AND rolname = ANY($1::text[])), 0)::int AS own
    FROM pg_roles WHERE rolname ~ '^user_[0-9a-f]{12}$' AND NOT rolsuper`;

/** Tenant temporary files count against nothing else: cap them per session at the storage quota. */
export function tempFileLimitSql(username: string, limitMb: number): string {
  if (!Number.isInteger(limitMb) || limitMb < 1) throw new Error(`Invalid temp_file_limit ${limitMb}`);
  return `ALTER ROLE ${ident("user", username)} SET temp_file_limit = '${limitMb}MB'`;
}

/** FORCE ends the sessions still connected to it. */
export const dropDatabaseSql = (databaseName: string) => `DROP DATABASE IF EXISTS ${ident("database", databaseName)} WITH (FORCE)`;

/** Only tenant and hold roles, whatever the caller passes. */
export function dropRolesSql(names: string[]): string {
  const quoted = names.map((name) => {
    const kind = kindOf(name);
    if (kind !== "user" && kind !== "hold") throw new Error(`Refusing to drop role ${JSON.stringify(name)}`);
    return ident(kind, name);
  });
  return `DROP ROLE IF EXISTS ${quoted.join(", ")}`;
}

/**
 * PUBLIC may connect to `postgres` and `template1` out of the box: a tenant could then hold
 * template1 (breaking CREATE DATABASE from it) or fill temporary tables outside its quota.
 * Superusers and explicit grants keep their access.
 */
export const HARDEN_SQL = `DO $harden$
  DECLARE d text;
  BEGIN
    -- Only when needed: concurrent GRANT/REVOKE on one database can fail ("tuple concurrently updated").
    FOR d IN SELECT datname FROM pg_database WHERE datname IN ('postgres', 'template1')
               AND (pg_catalog.has_database_privilege('public', oid, 'CONNECT') OR pg_catalog.has_database_privilege('public', oid, 'TEMPORARY')) LOOP
      EXECUTE pg_catalog.format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', d);
    END LOOP;
  END
  $harden$`;
