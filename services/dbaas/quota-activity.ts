/**
 * Which databases a quota tick measures, decided from one cheap read of the tenant server's
 * activity (quota-signals.ts: pg_stat_database counters, open write transactions and running
 * index builds or rewrites of every database in one query), so a database is measured as soon as
 * it nears its quota, starts writing fast or grows without writing rows, not only at the next full
 * round (pg_database_size stats every file). Pure.
 */
import { isNearQuota } from "./quota-rules";

/**
 * `rowsWritten`: rows inserted and updated since the server's statistics began (TOAST chunks
 * included, about 2 kB each); `transactions`: committed and rolled back since then; `writing`: write
 * transactions open for longer than a tick; `building`: CREATE INDEX, REINDEX, CLUSTER or VACUUM
 * FULL running now (they write files but move no row counter).
 */
export type DatabaseActivity = { rowsWritten: number; transactions: number; writing: number; building: number };

/** The counters a tick keeps as the next tick's baseline. */
export type Counters = Pick<DatabaseActivity, "rowsWritten" | "transactions">;

/** `grew`: its last measurement found it larger than the one before; `measuredAt`: when that was (ms, 0: never). */
export type Watched = { id: string; databaseName: string; storageBytes: number; maxStorageMb: number; readOnly: boolean; grew: boolean; measuredAt: number };

/**
 * Why a database is measured now: `near` (writable and above NEAR_RATIO of its quota at its last
 * measurement), `busy` (at least `busyRows` rows written since the last tick), `writing` (a write
 * transaction open longer than a tick: rows are counted only once committed), `building` (an index
 * build or table rewrite running), `growing` (its last measurement grew: an index built between
 * ticks moves a few catalog rows, not `busyRows`), `active` (any row or transaction since the last
 * tick: a size sample, at most `samples` a tick, the stalest first), `written-while-frozen`
 * (read-only, yet rows were written, a write transaction is open or a build runs: a path the freeze missed).
 */
export type MeasureReason = "near" | "busy" | "writing" | "building" | "growing" | "active" | "written-while-frozen";

/** A counter that went down (statistics reset) counts from zero. */
const delta = (now: number, previous: number) => (now >= previous ? now - previous : now);

/**
 * `before`: each database's counters at the previous tick; undefined on the first tick (no
 * delta yet: that round measures everything anyway). A database the previous tick did not see is
 * new since (created, or restored from a snapshot): every row it has was written since, so its
 * baseline is zero — else a burst written before its first tick would never count.
 */
export function dueForMeasure(
  watched: Watched[],
  activity: Map<string, DatabaseActivity>,
  before: Map<string, Counters> | undefined,
  busyRows: number,
  samples = Infinity,
): Map<string, MeasureReason> {
  const due = new Map<string, MeasureReason>();
  const sampled: Watched[] = [];
  for (const db of watched) {
    const now = activity.get(db.databaseName);
    const previous = before ? (before.get(db.databaseName) ?? { rowsWritten: 0, transactions: 0 }) : undefined;
    const written = !now || !previous ? 0 : delta(now.rowsWritten, previous.rowsWritten);
    const ended = !now || !previous ? 0 : delta(now.transactions, previous.transactions);
    const writing = now?.writing ?? 0;
    const building = now?.building ?? 0;
    if (db.readOnly) {
      if (written > 0 || writing > 0 || building > 0) due.set(db.id, "written-while-frozen");
    } else if (isNearQuota({ storageBytes: db.storageBytes, maxStorageMb: db.maxStorageMb, readOnly: false })) due.set(db.id, "near");
    else if (written >= busyRows) due.set(db.id, "busy");
    else if (writing > 0) due.set(db.id, "writing");
    else if (building > 0) due.set(db.id, "building");
    else if (db.grew || written > 0 || ended > 0) sampled.push(db);
  }
  // Growing first, then the longest unmeasured: a bounded cost per tick, and no database starved.
  sampled.sort((a, b) => Number(b.grew) - Number(a.grew) || a.measuredAt - b.measuredAt);
  for (const db of sampled.slice(0, Math.max(0, samples))) due.set(db.id, db.grew ? "growing" : "active");
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
