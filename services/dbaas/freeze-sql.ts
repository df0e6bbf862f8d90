/**
 * The SQL of the storage quota's freeze and thaw (tenant-server.ts freeze, thaw): the hold role
 * that takes over what the tenant owns, the transaction that takes every way to write, the check
 * that none is left, and the way back. Built from generated names only, as tenant-sql.ts.
 */
import { checkIdentifier, holdRoleOf, ident } from "./naming";
import { checkMarker, EQ, literal, LO_CREATORS, NE, type TenantRef } from "./sql-text";

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

/** Schemas of the server itself, whose rights are PostgreSQL's defaults and never the tenant's doing, and the platform's own (dbaas_guard: the admin's, where the tenant may create nothing). */
const TENANT_NAMESPACES = `nspname ${NE} ALL ('{pg_catalog,information_schema,dbaas_guard}'::name[]) AND nspname OPERATOR(pg_catalog.!~) '^pg_(toast|temp_|toast_temp_)'`;
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
