/**
 * The catalog visibility levels (DBAAS_HIDE_CATALOG) as SQL run inside a tenant database: which
 * catalog relations and functions each level closes to PUBLIC, and the idempotent statement that
 * brings a database to a level. Every name is pg_catalog-qualified (search-path.ts).
 */
import { CATALOG_LEVELS, type CatalogLevel } from "./settings";

const literal = (text: string) => `'${text}'`; // only ever for the fixed catalog names below

/**
 * Catalog relations that show other tenants' sessions and activity (hidden at `sessions` and `all`).
 * Left open: pg_locks (OIDs and pids, no names, queries or addresses) and the per-database
 * counters behind pg_stat_database, pg_stat_get_db_*(oid) (numbers by database OID).
 */
export const SESSION_RELATIONS = [
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
  "pg_stat_progress_analyze",
  "pg_stat_progress_create_index",
  "pg_stat_progress_cluster",
  "pg_stat_progress_basebackup",
  "pg_stat_progress_copy",
  "pg_stat_database",
  "pg_stat_database_conflicts",
] as const;
/** Functions behind the session views, callable directly otherwise. */
export const SESSION_FUNCTIONS = [
  "pg_stat_get_activity(integer)",
  "pg_stat_get_progress_info(text)",
  "pg_stat_get_backend_idset()",
  "pg_stat_get_backend_pid(integer)",
  "pg_stat_get_backend_dbid(integer)",
  "pg_stat_get_backend_userid(integer)",
  "pg_stat_get_backend_activity(integer)",
  "pg_stat_get_backend_client_addr(integer)",
  "pg_stat_get_backend_client_port(integer)",
  "pg_stat_get_backend_start(integer)",
  "pg_stat_get_backend_xact_start(integer)",
  "pg_stat_get_backend_activity_start(integer)",
  "pg_stat_get_backend_wait_event(integer)",
  "pg_stat_get_backend_wait_event_type(integer)",
] as const;
/**
 * Shared catalogs (and views on them) that list other databases and roles, hidden at `all` only:
 * pg_dump (15 reads all of pg_roles, its database's row of pg_database, shobj_description and
 * pg_db_role_setting), psql's \l and \du, GUI tools and frameworks read them.
 */
export const NAME_RELATIONS = [
  "pg_database",
  "pg_shdescription",
  "pg_shseclabel",
  "pg_seclabels",
  "pg_roles",
  "pg_user",
  "pg_group",
  "pg_auth_members",
  "pg_db_role_setting",
  "pg_shdepend",
] as const;
export const NAME_FUNCTIONS = ["shobj_description(oid, name)"] as const;

/** What each level closes to PUBLIC in a tenant database. */
export function hiddenAt(level: CatalogLevel): { relations: string[]; functions: string[] } {
  if (level === "off") return { relations: [], functions: [] };
  if (level === "sessions") return { relations: [...SESSION_RELATIONS], functions: [...SESSION_FUNCTIONS] };
  return { relations: [...SESSION_RELATIONS, ...NAME_RELATIONS], functions: [...SESSION_FUNCTIONS, ...NAME_FUNCTIONS] };
}

/**
 * Brings a tenant database to `level` whatever level it had (run inside it): what the level hides
 * is revoked from PUBLIC, every other object of the lists gets back PostgreSQL's default (SELECT,
 * EXECUTE for PUBLIC). Only what differs is changed, so running it again changes nothing; objects
 * a server version lacks are skipped, so one list serves several versions.
 */
export function catalogLevelSql(level: CatalogLevel): string {
  if (!CATALOG_LEVELS.includes(level)) throw new Error(`Invalid catalog level ${JSON.stringify(level)}`);
  const hidden = hiddenAt(level);
  const allRelations: string[] = [...SESSION_RELATIONS, ...NAME_RELATIONS];
  const allFunctions: string[] = [...SESSION_FUNCTIONS, ...NAME_FUNCTIONS];
  const list = (names: string[]) => `ARRAY[${names.map((n) => literal(n)).join(", ")}]::text[]`;
  // One loop per (kind of object, direction): only what differs from the wanted level changes.
  const loop = (names: string[], kind: "relation" | "function", hide: boolean) => {
    const oid = `pg_catalog.${kind === "relation" ? "to_regclass" : "to_regprocedure"}(pg_catalog.concat('pg_catalog.', n))`;
    const allowed =
      kind === "relation" ? `pg_catalog.has_table_privilege('public', ${oid}, 'SELECT')` : `pg_catalog.has_function_privilege('public', ${oid}, 'EXECUTE')`;
    const target = kind === "relation" ? "pg_catalog.%I" : "FUNCTION pg_catalog.%s";
    const statement = hide ? `REVOKE ALL ON ${target} FROM PUBLIC` : `GRANT ${kind === "relation" ? "SELECT" : "EXECUTE"} ON ${target} TO PUBLIC`;
    return `FOREACH n IN ARRAY ${list(names)} LOOP
      IF ${oid} IS NOT NULL AND ${hide ? "" : "NOT "}${allowed} THEN
        EXECUTE pg_catalog.format('${statement}', n);
      END IF;
    END LOOP;`;
  };
  return `DO $catalog$
  DECLARE n text;
  BEGIN
    ${loop(hidden.relations, "relation", true)}
    ${loop(
      allRelations.filter((r) => !hidden.relations.includes(r)),
      "relation",
      false,
    )}
    ${loop(hidden.functions, "function", true)}
    ${loop(
      allFunctions.filter((f) => !hidden.functions.includes(f)),
      "function",
      false,
    )}
  END
  $catalog$`;
}
