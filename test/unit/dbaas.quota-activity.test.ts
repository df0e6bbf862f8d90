/**
 * dbaas quota tick, pure: which databases one read of the server's activity gets measured, and
 * when the watch measures everything. No server.
 */
import type { DatabaseRow, DatabasesRepository } from "../../services/dbaas/databases.repository";
import { MIB, QuotaEnforcer, QuotaReport } from "../../services/dbaas/quota";
import { DatabaseActivity, dueForMeasure, MeasureReason, Watched, worstOvershootMb } from "../../services/dbaas/quota-activity";
import { QuotaWatch } from "../../services/dbaas/quota-watch";

const BUSY = 1000;
const db = (over: Partial<Watched> = {}): Watched => ({ id: "a", databaseName: "client_a", storageBytes: 8 * MIB, maxStorageMb: 20, readOnly: false, ...over });

describe("dbaas quota activity", () => {
  it.each<[string, Partial<Watched>, DatabaseActivity | undefined, number | undefined | "first tick", MeasureReason | undefined]>([
    ["idle and far from the quota: not measured", {}, { rowsWritten: 5000, writing: 0 }, 5000, undefined],
    ["first tick: no baseline, no delta", {}, { rowsWritten: 900_000, writing: 0 }, "first tick", undefined],
    ["new since the last tick (created, restored): every row counts", {}, { rowsWritten: BUSY, writing: 0 }, undefined, "busy"],
    ["new since the last tick, a few rows: not measured", {}, { rowsWritten: BUSY - 1, writing: 0 }, undefined, undefined],
    ["a few rows written: not measured", {}, { rowsWritten: 5999, writing: 0 }, 5000, undefined],
    ["busy: the threshold's worth of rows since the last tick", {}, { rowsWritten: 6000, writing: 0 }, 5000, "busy"],
    ["statistics reset: counts from zero", {}, { rowsWritten: 1500, writing: 0 }, 900_000, "busy"],
    ["a write transaction open longer than a tick", {}, { rowsWritten: 5000, writing: 1 }, 5000, "writing"],
    ["near: over 80 % at the last measurement, even idle", { storageBytes: 16 * MIB + 1 }, { rowsWritten: 5000, writing: 0 }, 5000, "near"],
    ["near wins over busy", { storageBytes: 17 * MIB }, { rowsWritten: 90_000, writing: 2 }, 5000, "near"],
    ["frozen and untouched: not measured", { readOnly: true, storageBytes: 30 * MIB }, { rowsWritten: 5000, writing: 0 }, 5000, undefined],
    [
      "frozen, yet one row written: a path the freeze missed",
      { readOnly: true, storageBytes: 30 * MIB },
      { rowsWritten: 5001, writing: 0 },
      5000,
      "written-while-frozen",
    ],
    ["frozen, yet a write transaction open", { readOnly: true }, { rowsWritten: 5000, writing: 1 }, 5000, "written-while-frozen"],
    ["no activity row (database gone): not measured", {}, undefined, 5000, undefined],
  ])("dbaas quota activity - %s", (_name, over, activity, before, reason) => {
    const watched = db(over);
    const now = new Map(activity ? [[watched.databaseName, activity]] : []);
    const previous = before === "first tick" ? undefined : new Map(before === undefined ? [] : [[watched.databaseName, before]]);
    expect(dueForMeasure([watched], now, previous, BUSY).get("a")).toBe(reason);
  });

  it("dbaas quota activity - worst-case overshoot is write rate × (tick + flush lag + enforcement)", () => {
    expect(worstOvershootMb(100, 1)).toBeCloseTo(250);
    expect(worstOvershootMb(100, 30, 1, 0.5)).toBeCloseTo(3150);
  });
});

describe("dbaas quota watch", () => {
  const row = (id: string, bytes = 8 * MIB): DatabaseRow =>
    ({ id, database_name: `client_${id}`, status: "active", storage_bytes: String(bytes), max_storage_mb: 20, read_only: false }) as DatabaseRow;

  it("dbaas quota watch - everything every fullS; in between, every tick, only what the activity points at", async () => {
    let now = 0;
    const checked: string[][] = [];
    const rows = [row("a"), row("b"), row("c", 17 * MIB)];
    const enforcer = {
      check: async (given: DatabaseRow[]) => (checked.push(given.map((r) => r.id)), {}) as QuotaReport,
    } as unknown as QuotaEnforcer;
    const repo = { listByStatus: async () => rows } as unknown as DatabasesRepository;
    let counters: Record<string, number> = { client_a: 10, client_b: 10, client_c: 10 };
    const tenant = { activity: async () => new Map(Object.entries(counters).map(([name, n]) => [name, { rowsWritten: n, writing: 0 }])) };
    const watch = new QuotaWatch({ enforcer, repo, tenant, fullS: () => 30, tickS: () => 1, busyRows: () => BUSY, now: () => now });

    expect(watch.intervalS()).toBe(1);
    await watch.round(); // nothing measured yet: a full round
    now = 1000;
    rows.push(row("d")); // created since, with a burst written before any tick saw it
    counters = { client_a: 10 + BUSY, client_b: 20, client_c: 10, client_d: BUSY };
    await watch.round(); // a: busy, c: near, b: a few rows, d: new and busy
    now = 2000;
    await watch.round(); // a quiet again; c still near
    now = 30_000;
    await watch.round(); // the full round is due
    expect(checked).toEqual([["a", "b", "c"], ["a", "c", "d"], ["c"], ["a", "b", "c", "d"]]);
  });
});
