/**
 * Extensions in client databases (docs/databases.md "Extensions"): the guard every client
 * database carries, and the reads behind the detail's `extensions`. PostgreSQL lets a role with
 * CREATE on the database create any *trusted* extension (its script runs as the bootstrap
 * superuser, written by PostgreSQL to be safe in a schema the caller controls); untrusted ones
 * need a superuser. The guard narrows the trusted set to the operator's allow-list: an event
 * trigger at the end of every CREATE/ALTER EXTENSION that fails the command (rolling the script
 * back) for any extension it created that is not listed, CASCADE's included. Tenants cannot create,
 * alter or disable event triggers (superuser only; `session_replication_role` is superuser-only).
 */
import { literal } from "./sql-text";

/** Extension names as the control files spell them (no quoting needed inside a literal). */
export const EXTENSION_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

export const GUARD_SCHEMA = "dbaas_guard";

/** The operator's default allow-list (API-DECISIONS "Extensions"); only installed ones become available. */
export const DEFAULT_EXTENSIONS = [
  "pg_trgm",
  "hstore",
  "citext",
  "uuid-ossp",
  "pgcrypto",
  "btree_gin",
  "btree_gist",
  "fuzzystrmatch",
  "unaccent",
  "tablefunc",
  "postgis",
] as const;

export function checkExtension(name: string): string {
  if (!EXTENSION_NAME.test(name)) throw new Error(`Invalid extension name ${JSON.stringify(name)}`);
  return name;
}

const namesOf = (allowed: readonly string[]): string => [...new Set(allowed.map(checkExtension))].sort().join(",");

/**
 * What a database's guard was made with, as recorded per database (databases.extension_policy):
 * the allow-list sorted and comma-joined, and the pooler role whose lookup it carries (pooler-sql.ts).
 */
export const policyOf = (allowed: readonly string[], poolerRole?: string): string => `${namesOf(allowed)}${poolerRole ? `;pooler=${poolerRole}` : ""}`;

/**
 * Installs (or replaces) the guard with `allowed` in the database it runs in. The schema must be
 * the admin's: a tenant that created `dbaas_guard` first (before the guard reached an older
 * database) makes this fail, and the database keeps PostgreSQL's rules until an operator looks.
 * The function runs as the tenant whose command fired it (it needs no rights of its own), with
 * search_path pinned so nothing of the tenant's is found by name.
 */
export function extensionGuardSql(allowed: readonly string[]): string {
  const names = namesOf(allowed);
  const list = names ? `ARRAY[${names.split(",").map(literal).join(", ")}]::text[]` : "ARRAY[]::text[]";
  return `DO $schema$
    BEGIN
      IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname OPERATOR(pg_catalog.=) '${GUARD_SCHEMA}'
                   AND nspowner OPERATOR(pg_catalog.<>) (SELECT oid FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) CURRENT_USER)) THEN
        RAISE EXCEPTION 'schema ${GUARD_SCHEMA} exists and is not the platform''s';
      END IF;
    END
    $schema$;
    CREATE SCHEMA IF NOT EXISTS ${GUARD_SCHEMA};
    REVOKE ALL ON SCHEMA ${GUARD_SCHEMA} FROM PUBLIC;
    CREATE OR REPLACE FUNCTION ${GUARD_SCHEMA}.allowed_extensions() RETURNS event_trigger
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $guard$
      DECLARE refused text;
      BEGIN
        SELECT e.extname INTO refused FROM pg_catalog.pg_extension e
         WHERE NOT (e.extname OPERATOR(pg_catalog.=) ANY (${list}))
           AND e.oid IN (SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c WHERE c.object_type OPERATOR(pg_catalog.=) 'extension'
                         UNION
                         SELECT d.refobjid FROM pg_catalog.pg_event_trigger_ddl_commands() c
                           JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) c.classid AND d.objid OPERATOR(pg_catalog.=) c.objid
                          WHERE d.deptype OPERATOR(pg_catalog.=) 'e' AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass)
         LIMIT 1;
        IF refused IS NOT NULL THEN
          RAISE EXCEPTION 'extension "%" is not available on this platform', refused
            USING ERRCODE = 'insufficient_privilege', HINT = 'The database detail lists the extensions available (extensions.available).';
        END IF;
      END
      $guard$;
    REVOKE ALL ON FUNCTION ${GUARD_SCHEMA}.allowed_extensions() FROM PUBLIC;
    DROP EVENT TRIGGER IF EXISTS dbaas_allowed_extensions;
    CREATE EVENT TRIGGER dbaas_allowed_extensions ON ddl_command_end WHEN TAG IN ('CREATE EXTENSION', 'ALTER EXTENSION')
      EXECUTE FUNCTION ${GUARD_SCHEMA}.allowed_extensions()`;
}

/** Of the allow-list, those this server has installed and a non-superuser may create (trusted). */
export const AVAILABLE_EXTENSIONS_SQL = `SELECT DISTINCT v.name FROM pg_catalog.pg_available_extension_versions v
   WHERE v.name OPERATOR(pg_catalog.=) ANY ($1::text[]) AND v.trusted ORDER BY v.name`;

/** The extensions created in the database it runs in (plpgsql, always there, left out). */
export const INSTALLED_EXTENSIONS_SQL = `SELECT extname AS name FROM pg_catalog.pg_extension
   WHERE extname OPERATOR(pg_catalog.<>) 'plpgsql' ORDER BY extname`;
