/**
 * The SQL text dbaas sends to the tenant server, built from generated names only: each builder
 * checks every identifier against its pattern and quotes it. The only literals inlined are the
 * pattern-checked names, marker and SCRAM verifier (utility statements take no bind parameters).
 */
import { VERIFIER_PATTERN } from "./credentials";
import { checkIdentifier, holdRoleOf, ident, kindOf } from "./naming";
import { catalogLevelSql } from "./catalog-sql";
import type { CatalogLevel } from "./settings";

// The catalog levels' SQL has its own module; it is part of what dbaas sends, so it is reachable from here too.
export { catalogLevelSql, hiddenAt, NAME_FUNCTIONS, NAME_RELATIONS, SESSION_FUNCTIONS, SESSION_RELATIONS } from "./catalog-sql";

export type TenantRef = { databaseName: string; username: string };

const MARKER_PATTERN = /^ci-platform:dbaas:[0-9a-f-]{36}$/;
// Large objects can be created by any role unless these are revoked; a read-only tenant must not.
const LO_CREATORS = "pg_catalog.lo_creat(integer), pg_catalog.lo_create(oid), pg_catalog.lo_from_bytea(oid, bytea)";

const literal = (text: string) => `'${text}'`; // only ever for texts that passed a pattern without quotes
// Operators in SQL run inside tenant databases name pg_catalog's, beside the pinned search_path (search-path.ts).
const EQ = "OPERATOR(pg_catalog.=)";
const NE = "OPERATOR(pg_catalog.<>)";

export function checkMarker(marker: string): string {
  if (!MARKER_PATTERN.test(marker)) throw new Error(`Invalid instance marker ${JSON.stringify(marker)}`);
  return marker;
}

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

export function holdRoleSql(ref: TenantRef, marker: string): string {
  const hold = ident("hold", holdRoleOf(ref.username));
  return `CREATE ROLE ${hold} NOLOGIN NOINHERIT; COMMENT ON ROLE ${hold} IS ${literal(checkMarker(marker))}`;
}

/**
 * Inside the tenant's database, in one transaction: everything the tenant owns passes to its hold
 * role, and every right that lets anyone write is taken from everyone but the owner, whatever the
 * tenant prepared before (grants to PUBLIC on tables, views, sequences, schemas and large objects,
 * grant options, SECURITY DEFINER routines). The tenant gets back SELECT and USAGE (and TRUNCATE to
 * free space, unless a TRUNCATE trigger would run with the owner's rights). The last step verifies
 * the result and aborts the whole transaction if any way to write is left.
 */
export function freezeSql(ref: TenantRef): string {
  const user = ident("user", ref.username);
  const userLit = literal(checkIdentifier("user", ref.username));
  const holdName = holdRoleOf(ref.username);
  const hold = literal(holdName);
  return `REASSIGN OWNED BY ${user} TO ${ident("hold", holdName)};
    REVOKE CREATE, TEMPORARY ON DATABASE ${ident("database", ref.databaseName)} FROM PUBLIC, ${user};
    REVOKE EXECUTE ON FUNCTION ${LO_CREATORS} FROM PUBLIC, ${user};
    DO $freeze$
    DECLARE r record; grantees text;
    BEGIN
      ${revokeEveryGrantLoops()}
      FOR r IN SELECT oid::regnamespace AS nsp FROM pg_namespace WHERE nspowner ${EQ} ${hold}::regrole OR nspname ${EQ} 'public' LOOP
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %s TO %I', r.nsp, ${userLit});
      END LOOP;
      FOR r IN SELECT oid::regclass AS rel, relkind FROM pg_class WHERE relowner ${EQ} ${hold}::regrole AND relkind ${EQ} ANY (${RELATION_KINDS}) LOOP
        EXECUTE pg_catalog.format('GRANT SELECT ON %s %s TO %I', ${relationWord("r.relkind")}, r.rel, ${userLit});
      END LOOP;
      FOR r IN SELECT oid FROM pg_largeobject_metadata WHERE lomowner ${EQ} ${hold}::regrole LOOP
        EXECUTE pg_catalog.format('GRANT SELECT ON LARGE OBJECT %s TO %I', r.oid, ${userLit});
      END LOOP;
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE NOT tgisinternal AND (tgtype OPERATOR(pg_catalog.&) 32) ${NE} 0) THEN
        FOR r IN SELECT oid::regclass AS rel FROM pg_class WHERE relowner ${EQ} ${hold}::regrole AND relkind ${EQ} ANY ('{r,p}'::"char"[]) LOOP
          EXECUTE pg_catalog.format('GRANT TRUNCATE ON %s TO %I', r.rel, ${userLit});
        END LOOP;
      END IF;
      ${verifyFrozenBlock(userLit)}
    END
    $freeze$`;
}

/** Schemas of the server itself, whose rights are PostgreSQL's defaults and never the tenant's doing. */
const TENANT_NAMESPACES = `nspname ${NE} ALL ('{pg_catalog,information_schema}'::name[]) AND nspname OPERATOR(pg_catalog.!~) '^pg_(toast|temp_|toast_temp_)'`;
/** Tables, partitioned tables, views, materialized views, foreign tables and sequences. */
const RELATION_KINDS = `'{r,p,v,m,f,S}'::"char"[]`;
/** The word GRANT and REVOKE take for a relation of kind `relkind`. */
const relationWord = (relkind: string) => `CASE WHEN ${relkind} ${EQ} 'S' THEN 'SEQUENCE' ELSE 'TABLE' END`;
/** A grantee of aclexplode as GRANT and REVOKE name it (0: PUBLIC). */
const granteeName = (grantee: string) => `CASE WHEN ${grantee} ${EQ} 0 THEN 'PUBLIC' ELSE ${grantee}::regrole::text END`;

/** Every grantee but the owner, PUBLIC included (as 0), from an ACL or its default when unset. */
const granteesOf = (acl: string, kind: string, owner: string) =>
  `SELECT pg_catalog.string_agg(DISTINCT ${granteeName("a.grantee")}, ', ')
     FROM pg_catalog.aclexplode(coalesce(${acl}, pg_catalog.acldefault('${kind}'::"char", ${owner}))) a WHERE a.grantee ${NE} ${owner}`;

/**
 * PL/pgSQL loops taking every right from everyone but the owner on the tenant's schemas, tables,
 * views, sequences (with their column rights), SECURITY DEFINER routines and large objects.
 * CASCADE also takes what was granted on through a grant option.
 */
function revokeEveryGrantLoops(): string {
  return `FOR r IN SELECT n.oid::regnamespace AS obj, (${granteesOf("n.nspacl", "n", "n.nspowner")}) AS who
                 FROM pg_namespace n WHERE ${TENANT_NAMESPACES} LOOP
        IF r.who IS NOT NULL THEN EXECUTE pg_catalog.format('REVOKE ALL ON SCHEMA %s FROM %s CASCADE', r.obj, r.who); END IF;
      END LOOP;
      FOR r IN SELECT c.oid::regclass AS obj, c.relkind,
                      (SELECT pg_catalog.string_agg(DISTINCT g, ', ') FROM (
                         SELECT ${granteeName("a.grantee")} AS g
                           FROM pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault((CASE WHEN c.relkind ${EQ} 'S' THEN 's' ELSE 'r' END)::"char", c.relowner))) a
                          WHERE a.grantee ${NE} c.relowner
                         UNION
                         SELECT ${granteeName("a.grantee")}
                           FROM pg_attribute t, pg_catalog.aclexplode(t.attacl) a
                          WHERE t.attrelid ${EQ} c.oid AND t.attacl IS NOT NULL AND a.grantee ${NE} c.relowner) gs) AS who
                 FROM pg_class c JOIN pg_namespace n ON n.oid ${EQ} c.relnamespace
                WHERE ${TENANT_NAMESPACES} AND c.relkind ${EQ} ANY (${RELATION_KINDS}) LOOP
        IF r.who IS NOT NULL THEN
          EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s CASCADE', ${relationWord("r.relkind")}, r.obj, r.who);
        END IF;
      END LOOP;
      FOR r IN SELECT p.oid::regprocedure AS obj, (${granteesOf("p.proacl", "f", "p.proowner")}) AS who
                 FROM pg_proc p JOIN pg_namespace n ON n.oid ${EQ} p.pronamespace WHERE ${TENANT_NAMESPACES} AND p.prosecdef LOOP
        IF r.who IS NOT NULL THEN EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM %s CASCADE', r.obj, r.who); END IF;
      END LOOP;
      FOR r IN SELECT l.oid AS obj, (${granteesOf("l.lomacl", "L", "l.lomowner")}) AS who FROM pg_largeobject_metadata l LOOP
        IF r.who IS NOT NULL THEN EXECUTE pg_catalog.format('REVOKE ALL ON LARGE OBJECT %s FROM %s CASCADE', r.obj, r.who); END IF;
      END LOOP;
      -- Default privileges only touch objects their role creates (none while frozen); cleared anyway.
      FOR r IN SELECT d.defaclrole::regrole AS role, d.defaclnamespace, d.defaclnamespace::regnamespace AS nsp,
                      CASE WHEN d.defaclobjtype ${EQ} 'r' THEN 'TABLES' WHEN d.defaclobjtype ${EQ} 'S' THEN 'SEQUENCES'
                           WHEN d.defaclobjtype ${EQ} 'f' THEN 'FUNCTIONS' WHEN d.defaclobjtype ${EQ} 'T' THEN 'TYPES' ELSE 'SCHEMAS' END AS kind,
                      (SELECT pg_catalog.string_agg(DISTINCT ${granteeName("a.grantee")}, ', ')
                         FROM pg_catalog.aclexplode(d.defaclacl) a WHERE a.grantee ${NE} d.defaclrole) AS who
                 FROM pg_default_acl d LOOP
        IF r.who IS NOT NULL THEN
          EXECUTE pg_catalog.format('ALTER DEFAULT PRIVILEGES FOR ROLE %s %s REVOKE ALL ON %s FROM %s CASCADE',
                         r.role, CASE WHEN r.defaclnamespace ${EQ} 0 THEN '' ELSE pg_catalog.concat('IN SCHEMA ', r.nsp) END, r.kind, r.who);
        END IF;
      END LOOP;`;
}

/**
 * Every way the tenant (directly or as a member of PUBLIC) could still write in the database it
 * runs in, one text per way; none once it is frozen. `userLit`: the tenant's quoted name.
 */
function writePathsSql(userLit: string): string {
  return `SELECT pg_catalog.string_agg(w, '; ') AS ways FROM (
        SELECT pg_catalog.concat('owns ', pg_catalog.count(*)) AS w FROM pg_shdepend
         WHERE refobjid ${EQ} ${userLit}::regrole AND deptype ${EQ} 'o' AND classid ${NE} 'pg_default_acl'::regclass
           AND dbid ${EQ} (SELECT oid FROM pg_database WHERE datname ${EQ} pg_catalog.current_database())
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0
        UNION ALL SELECT 'may create in the database' WHERE pg_catalog.has_database_privilege(${userLit}, pg_catalog.current_database(), 'CREATE, TEMPORARY')
        UNION ALL SELECT pg_catalog.concat('may create in schema ', nspname) FROM pg_namespace WHERE pg_catalog.has_schema_privilege(${userLit}, oid, 'CREATE')
        UNION ALL SELECT pg_catalog.concat('may write ', c.oid::regclass) FROM pg_class c JOIN pg_namespace n ON n.oid ${EQ} c.relnamespace
         WHERE ${TENANT_NAMESPACES} AND (
           (c.relkind ${EQ} 'S' AND pg_catalog.has_sequence_privilege(${userLit}, c.oid, 'USAGE, UPDATE'))
           OR (c.relkind ${EQ} ANY ('{r,p,v,m,f}'::"char"[]) AND (pg_catalog.has_table_privilege(${userLit}, c.oid, 'INSERT, UPDATE, DELETE')
                                                              OR pg_catalog.has_any_column_privilege(${userLit}, c.oid, 'INSERT, UPDATE'))))
        UNION ALL SELECT pg_catalog.concat('may run ', p.oid::regprocedure) FROM pg_proc p JOIN pg_namespace n ON n.oid ${EQ} p.pronamespace
         WHERE p.prosecdef AND ${TENANT_NAMESPACES} AND pg_catalog.has_function_privilege(${userLit}, p.oid, 'EXECUTE')
        UNION ALL SELECT 'may create large objects' WHERE pg_catalog.has_function_privilege(${userLit}, 'pg_catalog.lo_creat(integer)', 'EXECUTE')
        UNION ALL SELECT pg_catalog.concat('may write large object ', l.oid)
          FROM pg_largeobject_metadata l, pg_catalog.aclexplode(coalesce(l.lomacl, pg_catalog.acldefault('L'::"char", l.lomowner))) a
         WHERE a.privilege_type ${EQ} 'UPDATE' AND (a.grantee ${EQ} 0 OR a.grantee ${EQ} ${userLit}::regrole)
      ) ways`;
}

/** Aborts the freeze if the tenant could still write anywhere (see writePathsSql). */
function verifyFrozenBlock(userLit: string): string {
  return `${writePathsSql(userLit)} INTO grantees;
      IF grantees IS NOT NULL THEN RAISE EXCEPTION 'freeze incomplete: the tenant still %', grantees; END IF;`;
}

/**
 * Run inside a frozen database: how the tenant could write there now (null: nowhere). A frozen
 * database is checked every round, so a path the freeze missed (an object created after it
 * through one prepared before) is found and the freeze applied again.
 */
export const frozenWritePathsSql = (ref: TenantRef): string => writePathsSql(literal(checkIdentifier("user", ref.username)));

/** Last resort when a freeze cannot be completed: the tenant cannot connect until it is thawed. */
export function lockOutSql(ref: TenantRef): string {
  return `REVOKE CONNECT, TEMPORARY, CREATE ON DATABASE ${ident("database", ref.databaseName)} FROM PUBLIC, ${ident("user", ref.username)}`;
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
               AND (pg_catalog.has_database_privilege('public', oid, 'CONNECT') OR pg_catalog.has_database_privilege('public', oid, 'TEMPORARY')) LOOP
      EXECUTE pg_catalog.format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', d);
    END LOOP;
  END
  $harden$`;
