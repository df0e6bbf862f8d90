/**
 * The SQL text dbaas sends to the tenant server, built from generated names only: each builder
 * checks every identifier against its pattern and quotes it. The only literals inlined are the
 * pattern-checked names, marker and SCRAM verifier (utility statements take no bind parameters).
 */
import { VERIFIER_PATTERN } from "./credentials";
import { checkIdentifier, holdRoleOf, ident, kindOf } from "./naming";

export type TenantRef = { databaseName: string; username: string };

const MARKER_PATTERN = /^ci-platform:dbaas:[0-9a-f-]{36}$/;
// Large objects can be created by any role unless these are revoked; a read-only tenant must not.
const LO_CREATORS = "pg_catalog.lo_creat(integer), pg_catalog.lo_create(oid), pg_catalog.lo_from_bytea(oid, bytea)";

const literal = (text: string) => `'${text}'`; // only ever for texts that passed a pattern without quotes

export function checkMarker(marker: string): string {
  if (!MARKER_PATTERN.test(marker)) throw new Error(`Invalid instance marker ${JSON.stringify(marker)}`);
  return marker;
}

/** LOGIN and nothing more, a connection limit, the password as a verifier, and the marker. */
export function createRoleSql(ref: TenantRef, verifier: string, connectionLimit: number, marker: string): string {
  if (!VERIFIER_PATTERN.test(verifier)) throw new Error("Refusing a password that is not a SCRAM verifier");
  if (!Number.isInteger(connectionLimit) || connectionLimit < 1) throw new Error(`Invalid connection limit ${connectionLimit}`);
  const user = ident("user", ref.username);
  return `CREATE ROLE ${user} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS
            CONNECTION LIMIT ${connectionLimit} PASSWORD ${literal(verifier)};
          COMMENT ON ROLE ${user} IS ${literal(checkMarker(marker))}`;
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
          SELECT pg_database_size(${literal(ref.databaseName)}) AS bytes`;
}

/** Inside the new database: only the tenant may use (and create in) schema public. */
export function prepareSchemaSql(ref: TenantRef): string {
  const user = ident("user", ref.username);
  return `REVOKE ALL ON SCHEMA public FROM PUBLIC;
          GRANT USAGE, CREATE ON SCHEMA public TO ${user};
          REVOKE EXECUTE ON FUNCTION ${LO_CREATORS} FROM PUBLIC;
          GRANT EXECUTE ON FUNCTION ${LO_CREATORS} TO ${user}`;
}

export function holdRoleSql(ref: TenantRef, marker: string): string {
  const hold = ident("hold", holdRoleOf(ref.username));
  return `CREATE ROLE ${hold} NOLOGIN NOINHERIT; COMMENT ON ROLE ${hold} IS ${literal(checkMarker(marker))}`;
}

/**
 * Inside the tenant's database, in one transaction: everything the tenant owns passes to its hold
 * role; it gets back SELECT (and TRUNCATE to free space, unless a TRUNCATE trigger would run with
 * the owner's rights), loses CREATE, TEMPORARY, large-object creation and the EXECUTE of
 * SECURITY DEFINER routines (which would write with the owner's rights).
 */
export function freezeSql(ref: TenantRef): string {
  const user = ident("user", ref.username);
  const userLit = literal(checkIdentifier("user", ref.username));
  const holdName = holdRoleOf(ref.username);
  const hold = literal(holdName);
  return `REASSIGN OWNED BY ${user} TO ${ident("hold", holdName)};
    REVOKE CREATE ON SCHEMA public FROM ${user};
    REVOKE CREATE, TEMPORARY ON DATABASE ${ident("database", ref.databaseName)} FROM ${user};
    REVOKE EXECUTE ON FUNCTION ${LO_CREATORS} FROM ${user};
    DO $freeze$
    DECLARE r record;
    BEGIN
      FOR r IN SELECT nspname FROM pg_namespace WHERE nspowner = ${hold}::regrole OR nspname = 'public' LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', r.nspname, ${userLit});
      END LOOP;
      FOR r IN SELECT oid::regclass AS rel FROM pg_class WHERE relowner = ${hold}::regrole AND relkind IN ('r', 'p', 'v', 'm', 'S') LOOP
        EXECUTE format('GRANT SELECT ON %s TO %I', r.rel, ${userLit});
      END LOOP;
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE NOT tgisinternal AND (tgtype & 32) <> 0) THEN
        FOR r IN SELECT oid::regclass AS rel FROM pg_class WHERE relowner = ${hold}::regrole AND relkind IN ('r', 'p') LOOP
          EXECUTE format('GRANT TRUNCATE ON %s TO %I', r.rel, ${userLit});
        END LOOP;
      END IF;
      FOR r IN SELECT oid::regprocedure AS fn FROM pg_proc WHERE proowner = ${hold}::regrole AND prosecdef LOOP
        EXECUTE format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC, %I', r.fn, ${userLit});
      END LOOP;
    END
    $freeze$`;
}

/** Inside the tenant's database: ownership and create rights back (`reassign`: its hold role exists). */
export function thawSql(ref: TenantRef, reassign: boolean): string {
  const user = ident("user", ref.username);
  return `${reassign ? `REASSIGN OWNED BY ${ident("hold", holdRoleOf(ref.username))} TO ${user};` : ""}
    GRANT USAGE, CREATE ON SCHEMA public TO ${user};
    GRANT CONNECT, TEMPORARY, CREATE ON DATABASE ${ident("database", ref.databaseName)} TO ${user};
    GRANT EXECUTE ON FUNCTION ${LO_CREATORS} TO ${user}`;
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
               AND (has_database_privilege('public', oid, 'CONNECT') OR has_database_privilege('public', oid, 'TEMPORARY')) LOOP
      EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', d);
    END LOOP;
  END
  $harden$`;
