/**
 * Which databases a quota tick measures, decided from one cheap read of the tenant server's
 * activity (TenantServer.activity: pg_stat_database counters and open write transactions of every
 * database in one query), so a database is measured as soon as it nears its quota or starts
 * writing fast, not only at the next full round (pg_database_size stats every file). Pure.
 */
import { isNearQuota } from "./quota";

/** `rowsWritten`: rows inserted and updated since the server's statistics began (TOAST chunks included, about 2 kB each); `writing`: write transactions open for longer than a tick. */
export type DatabaseActivity = { rowsWritten: number; writing: number };

export type Watched = { id: string; databaseName: string; storageBytes: number; maxStorageMb: number; readOnly: boolean };

/**
 * Why a database is measured now: `near` (writable and above NEAR_RATIO of its quota at its last
 * measurement), `busy` (at least `busyRows` rows written since the last tick), `writing` (a write
 * transaction open longer than a tick: rows are counted only once committed), `written-while-frozen`
 * (read-only, yet rows were written or a write transaction is open: a path the freeze missed).
 */
export type MeasureReason = "near" | "busy" | "writing" | "written-while-frozen";

/**
 * `before`: each database's rowsWritten at the previous tick; undefined on the first tick (no
 * delta yet: that round measures everything anyway). A database the previous tick did not see is
 * new since (created, or restored from a snapshot): every row it has was written since, so its
 * baseline is zero — else a burst written before its first tick would never count. A counter
 * that went down (statistics reset) counts from zero.
 */
export function dueForMeasure(
  watched: Watched[],
  activity: Map<string, DatabaseActivity>,
  before: Map<string, number> | undefined,
  busyRows: number,
): Map<string, MeasureReason> {
  const due = new Map<string, MeasureReason>();
  for (const db of watched) {
    const now = activity.get(db.databaseName);
    const previous = before ? (before.get(db.databaseName) ?? 0) : undefined;
    const written = !now || previous === undefined ? 0 : now.rowsWritten >= previous ? now.rowsWritten - previous : now.rowsWritten;
    const writing = now?.writing ?? 0;
    if (db.readOnly) {
      if (written > 0 || writing > 0) due.set(db.id, "written-while-frozen");
    } else if (isNearQuota({ storageBytes: db.storageBytes, maxStorageMb: db.maxStorageMb, readOnly: false })) due.set(db.id, "near");
    else if (written >= busyRows) due.set(db.id, "busy");
    else if (writing > 0) due.set(db.id, "writing");
  }
  return due;
}

/**
 * Worst-case overshoot past a quota, in MiB, for a tenant writing `writeMbPerS` (README "Storage
 * quota"): what it writes within one effective interval — a tick plus the statistics' flush lag
 * (PostgreSQL reports a busy session's counters about once a second) plus measuring and freezing.
 */
export function worstOvershootMb(writeMbPerS: number, tickS: number, flushLagS = 1, enforceS = 0.5): number {
  return writeMbPerS * (tickS + flushLagS + enforceS);
}
