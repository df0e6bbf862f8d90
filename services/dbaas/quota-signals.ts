/**
 * The quota tick's one read of the tenant server (quota-activity.ts): every named database's
 * counters, open write transactions and running index builds or rewrites. Cheap: statistics and
 * progress views, no file is read. Schema-qualified, so no search_path can stand in for a catalog.
 */
import { checkIdentifier } from "./naming";
import type { DatabaseActivity } from "./quota-activity";
import type { Queryable } from "./tenant-connections";

/** CREATE INDEX / REINDEX and CLUSTER / VACUUM FULL write whole files without moving a row counter. */
const ACTIVITY_SQL = `
  SELECT d.datname,
         (d.tup_inserted OPERATOR(pg_catalog.+) d.tup_updated)::pg_catalog.float8 AS rows_written,
         (d.xact_commit OPERATOR(pg_catalog.+) d.xact_rollback)::pg_catalog.float8 AS transactions,
         COALESCE(a.n, 0)::pg_catalog.int4 AS writing,
         COALESCE(b.n, 0)::pg_catalog.int4 AS building
    FROM pg_catalog.pg_stat_database d
    LEFT JOIN (SELECT datid, pg_catalog.count(*) AS n FROM pg_catalog.pg_stat_activity
                WHERE backend_xid IS NOT NULL
                  AND xact_start OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $2))
                GROUP BY datid) a ON a.datid OPERATOR(pg_catalog.=) d.datid
    LEFT JOIN (SELECT datid, pg_catalog.count(*) AS n
                 FROM (SELECT datid FROM pg_catalog.pg_stat_progress_create_index
                       UNION ALL SELECT datid FROM pg_catalog.pg_stat_progress_cluster) p
                GROUP BY datid) b ON b.datid OPERATOR(pg_catalog.=) d.datid
   WHERE d.datname OPERATOR(pg_catalog.=) ANY($1::pg_catalog.text[])`;

/** `minAgeS`: only write transactions open longer count as `writing`. */
export async function readActivity(via: Queryable, databaseNames: string[], minAgeS: number): Promise<Map<string, DatabaseActivity>> {
  const found = new Map<string, DatabaseActivity>();
  if (!databaseNames.length) return found;
  type Row = { datname: string; rows_written: number; transactions: number; writing: number; building: number };
  const { rows } = await via.query<Row>(ACTIVITY_SQL, [databaseNames.map((n) => checkIdentifier("database", n)), minAgeS]);
  for (const row of rows) {
    found.set(row.datname, { rowsWritten: Number(row.rows_written), transactions: Number(row.transactions), writing: row.writing, building: row.building });
  }
  return found;
}
