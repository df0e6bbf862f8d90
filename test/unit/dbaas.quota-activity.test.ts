/**
 * dbaas quota tick, pure: which databases one read of the server's activity gets measured, and
 * when the watch measures everything. No server.
 */
import type { DatabaseRow, DatabasesRepository } from "../../services/dbaas/databases.repository";
import { MIB, QuotaEnforcer, QuotaReport } from "../../services/dbaas/quota";
import { Counters, DatabaseActivity, dueForMeasure, MeasureReason, Watched, worstOvershootMb } from "../../services/dbaas/quota-activity";
import { QuotaWatch } from "../../services/dbaas/quota-watch";

const BUSY = 1000;
/** Activity with `transactions` at 100, as the baseline below: only rows and open transactions moved. */
const act = (rowsWritten: number, writing = 0, more: Partial<DatabaseActivity> = {}): DatabaseActivity => ({
  rowsWritten,
  transactions: 100,
  writing,
  building: 0,
  ...more,
});
const db = (over: Partial<Watched> = {}): Watched => ({
  id: "a",
  databaseName: "client_a",
  storageBytes: 8 * MIB,
  maxStorageMb: 20,
  readOnly: false,
  grew: false,
  measuredAt: 0,
  ...over,
});

describe("dbaas quota activity", () => {
  it.each<[string, Partial<Watched>, DatabaseActivity | undefined, number | undefined | "first tick", MeasureReason | undefined]>([
    ["idle and far from the quota: not measured", {}, act(5000, 0), 5000, undefined],
    ["first tick: no baseline, no delta", {}, act(900_000, 0), "first tick", undefined],
    ["new since the last tick (created, restored): every row counts", {}, act(BUSY, 0), undefined, "busy"],
    ["new since the last tick, a few rows: a size sample", {}, act(BUSY - 1, 0), undefined, "active"],
    ["a few rows written: a size sample (an index build writes a few catalog rows)", {}, act(5999, 0), 5000, "active"],
    ["only transactions ended (no row counted): a size sample", {}, act(5000, 0, { transactions: 101 }), 5000, "active"],
    ["an index build or table rewrite running, no row counted", {}, act(5000, 0, { building: 1 }), 5000, "building"],
    ["its last measurement grew, idle since: measured again", { grew: true }, act(5000, 0), 5000, "growing"],
    ["frozen, yet an index build running", { readOnly: true }, act(5000, 0, { building: 1 }), 5000, "written-while-frozen"],
    ["busy: the threshold's worth of rows since the last tick", {}, act(6000, 0), 5000, "busy"],
    ["statistics reset: counts from zero", {}, act(1500, 0), 900_000, "busy"],
    ["a write transaction open longer than a tick", {}, act(5000, 1), 5000, "writing"],
    ["near: over 80 % at the last measurement, even idle", { storageBytes: 16 * MIB + 1 }, act(5000, 0), 5000, "near"],
    ["near wins over busy", { storageBytes: 17 * MIB }, act(90_000, 2), 5000, "near"],
    ["frozen and untouched: not measured", { readOnly: true, storageBytes: 30 * MIB }, act(5000, 0), 5000, undefined],
    ["frozen, yet one row written: a path the freeze missed", { readOnly: true, storageBytes: 30 * MIB }, act(5001, 0), 5000, "written-while-frozen"],
    ["frozen, yet a write transaction open", { readOnly: true }, act(5000, 1), 5000, "written-while-frozen"],
    ["no activity row (database gone): not measured", {}, undefined, 5000, undefined],
  ])("dbaas quota activity - %s", (_name, over, activity, before, reason) => {
    const watched = db(over);
    const now = new Map(activity ? [[watched.databaseName, activity]] : []);
    const baseline = (n: number): Counters => ({ rowsWritten: n, transactions: 100 });
    const previous = before === "first tick" ? undefined : new Map(before === undefined ? [] : [[watched.databaseName, baseline(before)]]);
    expect(dueForMeasure([watched], now, previous, BUSY).get("a")).toBe(reason);
  });

  it("dbaas quota activity - size samples are bounded per tick: growing ones first, then the longest unmeasured", () => {
    const dbs = [
      db({ id: "fresh", databaseName: "client_fresh", measuredAt: 3000 }),
      db({ id: "stale", databaseName: "client_stale", measuredAt: 1000 }),
      db({ id: "grown", databaseName: "client_grown", measuredAt: 5000, grew: true }),
      db({ id: "idle", databaseName: "client_idle", measuredAt: 0 }),
    ];
    const now = new Map(dbs.map((d) => [d.databaseName, act(d.id === "idle" ? 10 : 11)]));
    const before = new Map(dbs.map((d) => [d.databaseName, { rowsWritten: 10, transactions: 100 }]));
    expect([...dueForMeasure(dbs, now, before, BUSY, 2)]).toEqual([
      ["grown", "growing"],
      ["stale", "active"],
    ]);
    expect(dueForMeasure(dbs, now, before, BUSY, 0).size).toBe(0);
    expect(dueForMeasure(dbs, now, before, BUSY).size).toBe(3);
  });

  it("dbaas quota activity - worst-case overshoot is write rate × (tick + flush lag + enforcement)", () => {
    expect(worstOvershootMb(100, 1)).toBeCloseTo(250);
    expect(worstOvershootMb(100, 30, 1, 0.5)).toBeCloseTo(3150);
  });
});

describe("dbaas quota watch", () => {
  const row = (id: string, bytes = 8 * MIB): DatabaseRow =>
    ({ id, database_name: `client_${id}`, status: "active", storage_bytes: String(bytes), max_storage_mb: 20, read_only: false }) as DatabaseRow;

  it("dbaas quota watch - everything every fullS; in between, every tick, only what the activity or a growing size points at", async () => {
    let now = 0;
    const checked: string[][] = [];
    const rows = [row("a"), row("b"), row("c", 17 * MIB)];
    const enforcer = {
      check: async (given: DatabaseRow[]) => (checked.push(given.map((r) => r.id)), {}) as QuotaReport,
    } as unknown as QuotaEnforcer;
    const repo = { listByStatus: async () => rows } as unknown as DatabasesRepository;
    let counters: Record<string, number> = { client_a: 10, client_b: 10, client_c: 10 };
    const tenant = { activity: async () => new Map(Object.entries(counters).map(([name, n]) => [name, act(n)])) };
    const watch = new QuotaWatch({ enforcer, repo, tenant, fullS: () => 30, tickS: () => 1, busyRows: () => BUSY, samples: () => 50, now: () => now });

    expect(watch.intervalS()).toBe(1);
    await watch.round(); // nothing measured yet: a full round
    now = 1000;
    rows.push(row("d")); // created since, with a burst written before any tick saw it
    counters = { client_a: 10 + BUSY, client_b: 20, client_c: 10, client_d: BUSY };
    await watch.round(); // a: busy, b: a few rows (a size sample), c: near, d: new and busy
    rows[1] = row("b", 9 * MIB); // that sample found b larger (an index built with few rows)
    now = 2000;
    await watch.round(); // a quiet again; b growing, measured though idle; c still near
    now = 3000;
    await watch.round(); // b no longer growing; c still near
    now = 30_000;
    await watch.round(); // the full round is due
    expect(checked).toEqual([["a", "b", "c"], ["a", "b", "c", "d"], ["b", "c"], ["c"], ["a", "b", "c", "d"]]);
  });
});
