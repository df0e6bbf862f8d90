/**
 * What dbaas reads from the tenant server across its databases at once: their sizes and write
 * rights (the quota), and what an instance's marker is on (the reconciler). TenantServer's
 * measure and listMarked run these on its pool.
 */
import { isUnavailable } from "./faults";
import { checkIdentifier, kindOf } from "./naming";
import { checkMarker, type TenantRef } from "./sql-text";
import type { Queryable } from "./tenant-connections";

export type Measured = { bytes: number; writable: boolean };

/**
 * Size in bytes and whether the tenant may write (freeze revokes CREATE on the database in the
 * same transaction as everything else, so that right tells the state the server is really in).
 * Databases or roles that do not exist are absent from the map.
 */
export async function measureDatabases(pool: Queryable, refs: TenantRef[]): Promise<Map<string, Measured>> {
  const measured = new Map<string, Measured>();
  refs.forEach((r) => (checkIdentifier("database", r.databaseName), checkIdentifier("user", r.username)));
  const query = `SELECT d.datname, pg_catalog.pg_database_size(d.oid) AS bytes, pg_catalog.has_database_privilege(r.oid, d.oid, 'CREATE') AS writable
                     FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS t(datname, username)
                     JOIN pg_database d ON d.datname = t.datname
                     JOIN pg_roles r ON r.rolname = t.username`;
  const collect = async (batch: TenantRef[]) => {
    const { rows } = await pool.query<{ datname: string; bytes: string; writable: boolean }>(query, [
      batch.map((r) => r.databaseName),
      batch.map((r) => r.username),
    ]);
    for (const row of rows) measured.set(row.datname, { bytes: Number(row.bytes), writable: row.writable });
  };
  if (!refs.length) return measured;
  try {
    await collect(refs);
  } catch (err) {
    if (isUnavailable(err)) throw err;
    // A database dropped while this ran makes pg_database_size fail: measure one by one.
    for (const ref of refs) await collect([ref]).catch(() => undefined);
  }
  return measured;
}

/** Databases and roles carrying `marker`, i.e. created by the platform instance that owns it. */
export async function listMarkedObjects(pool: Queryable, marker: string): Promise<{ databases: string[]; roles: string[] }> {
  const { rows } = await pool.query<{ kind: "database" | "role"; name: string }>(
    `SELECT 'database' AS kind, d.datname AS name FROM pg_database d
         JOIN pg_shdescription s ON s.objoid = d.oid AND s.classoid = 'pg_database'::regclass
        WHERE s.description = $1
       UNION ALL
       SELECT 'role', r.rolname FROM pg_roles r
         JOIN pg_shdescription s ON s.objoid = r.oid AND s.classoid = 'pg_authid'::regclass
        WHERE s.description = $1`,
    [checkMarker(marker)],
  );
  return {
    databases: rows.filter((r) => r.kind === "database" && kindOf(r.name) === "database").map((r) => r.name),
    roles: rows.filter((r) => r.kind === "role" && (kindOf(r.name) === "user" || kindOf(r.name) === "hold")).map((r) => r.name),
  };
}
