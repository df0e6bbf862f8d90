/**
 * The usage ledger against PostgreSQL: a source key counts once (a redelivered or concurrently
 * republished batch changes nothing), a job's GPU-seconds split at hour edges so any window cuts
 * it exactly, events count where they end, and the sums are per account. A sum and the lookup of
 * keys still pending read one snapshot.
 */
import { randomUUID } from "crypto";
import { Pool, PoolClient } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { gpuUsageKey, inferenceUsageKey, UsageRecord } from "../../lib/usage-protocol";
import { LedgerRepository } from "../../services/usage/ledger.repository";
import { migrations } from "../../services/usage/migrations";
import { dropDatabase, testDatabaseUrl } from "../support/platform";

const T = (iso: string) => new Date(`2030-01-15T${iso}Z`);
const gpu = (clientId: string, start: string, end: string, cards = 1, name = "A100", key = gpuUsageKey(randomUUID(), 1)): UsageRecord => ({
  key,
  clientId,
  resource: "gpu",
  name,
  start: T(start).toISOString(),
  end: T(end).toISOString(),
  quantity: cards,
});
const tokens = (clientId: string, at: string, n: number, model = "llama"): UsageRecord => ({
  key: inferenceUsageKey(randomUUID()),
  clientId,
  resource: "inference",
  name: model,
  start: T(at).toISOString(),
  end: T(at).toISOString(),
  quantity: n,
});

describe("usage ledger - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pool: Pool;
  let ledger: LedgerRepository;
  let alice: string;
  let bob: string;
  const sum = async (clientId: string, from: string, to: string, resource = "gpu") =>
    (await ledger.totals([clientId], T(from), T(to)))
      .filter((t) => t.resource === resource)
      .reduce((a, t) => ({ amount: a.amount + t.amount, events: a.events + t.events }), { amount: 0, events: 0 });

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 8 });
    pool.on("error", () => undefined);
    await migrate(pool, "usage", migrations);
    ledger = new LedgerRepository(pool);
  });
  beforeEach(() => {
    alice = randomUUID();
    bob = randomUUID();
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  it("usage ledger - a job across two hour edges: every window cuts it exactly (seconds × cards)", async () => {
    // 10:30 → 12:15 on 2 cards: 6300 s × 2.
    expect(await ledger.record([gpu(alice, "10:30:00", "12:15:00", 2)])).toBe(1);
    const cases: Array<[string, string, string, number]> = [
      ["the whole day", "00:00:00", "23:00:00", 12600],
      ["whole hours only", "11:00:00", "12:00:00", 7200],
      ["its first half", "10:00:00", "11:22:30", 2 * 3150],
      ["its second half", "11:22:30", "13:00:00", 2 * 3150],
      ["inside one hour", "11:10:00", "11:20:00", 1200],
      ["two partial hours", "10:45:00", "11:15:00", 3600],
      ["before it", "09:00:00", "10:30:00", 0],
      ["after it", "12:15:00", "14:00:00", 0],
    ];
    for (const [name, from, to, expected] of cases) expect([name, (await sum(alice, from, to)).amount]).toEqual([name, expect.closeTo(expected, 6)]);
    // The job counts once, in the window holding its end.
    expect((await sum(alice, "10:00:00", "12:00:00")).events).toBe(0);
    expect((await sum(alice, "12:00:00", "12:15:00")).events).toBe(1);
    expect((await sum(alice, "00:00:00", "23:00:00")).events).toBe(1);
  });

  it("usage ledger - a window edge cuts a three-day job exactly, recorded after short ones (the edge reads as far as the account's longest record)", async () => {
    // Short jobs first: the account's longest record is 10 s until the long one arrives.
    await ledger.record([gpu(alice, "09:00:00", "09:00:10"), gpu(alice, "11:59:50", "12:00:00")]);
    const long = { ...gpu(alice, "10:00:00", "10:00:01"), start: new Date(Date.UTC(2030, 0, 13, 10)).toISOString() }; // Jan 13 10:00 → Jan 15 10:00:01
    await ledger.record([long]);
    const cases: Array<[string, string, string, number]> = [
      ["an hour cut at both ends", "08:15:00", "08:45:00", 1800],
      ["from mid-hour over its last second", "09:30:00", "11:00:00", 1800 + 1],
      ["an edge inside the short job", "09:00:05", "09:30:00", 5 + 1795],
    ];
    for (const [name, from, to, expected] of cases) expect([name, (await sum(alice, from, to)).amount]).toEqual([name, expect.closeTo(expected, 6)]);
    expect((await sum(alice, "10:00:00.500", "10:30:00")).events).toBe(1);
    // Bob's records are not read for Alice, nor his longest span used for her edges.
    expect((await sum(bob, "08:15:00", "08:45:00")).amount).toBe(0);
  });

  it("usage ledger - a redelivered batch, and the same keys published concurrently by two replicas, count once", async () => {
    const batch = [gpu(alice, "10:00:00", "10:00:10"), tokens(alice, "10:05:00", 123), tokens(alice, "10:06:00", 7)];
    expect(await ledger.record(batch)).toBe(3);
    expect(await ledger.record(batch)).toBe(0);
    const concurrent = await Promise.all([ledger.record([...batch, tokens(alice, "10:07:00", 5)]), ledger.record([tokens(alice, "10:08:00", 1), ...batch])]);
    expect(concurrent.sort()).toEqual([1, 1]);
    const t = await sum(alice, "10:00:00", "11:00:00", "inference");
    expect(t).toEqual({ amount: 123 + 7 + 5 + 1, events: 4 });
    expect((await sum(alice, "10:00:00", "11:00:00")).amount).toBeCloseTo(10, 6);
    // A batch repeating one key inside itself counts it once too.
    const dup = tokens(alice, "10:09:00", 1000);
    expect(await ledger.record([dup, dup])).toBe(1);
  });

  it("usage ledger - tokens count where they were answered; sums are per account and per name", async () => {
    await ledger.record([tokens(alice, "10:59:59", 10, "a"), tokens(alice, "11:00:00", 20, "b"), tokens(bob, "10:30:00", 40, "a")]);
    expect(await sum(alice, "10:00:00", "11:00:00", "inference")).toEqual({ amount: 10, events: 1 });
    expect(await sum(alice, "11:00:00", "11:00:01", "inference")).toEqual({ amount: 20, events: 1 });
    const both = await ledger.totals([alice, bob], T("00:00:00"), T("23:00:00"));
    const of = (c: string, name: string) => both.find((t) => t.clientId === c && t.name === name)?.amount;
    expect([of(alice, "a"), of(alice, "b"), of(bob, "a"), of(bob, "b")]).toEqual([10, 20, 40, undefined]);
  });

  it("usage ledger - storage held over an hour is MB-hours, the elapsed part of it in a window", async () => {
    const record: UsageRecord = {
      key: `storage:${randomUUID()}:x`,
      clientId: alice,
      resource: "storage",
      name: "postgresql",
      start: T("10:00:00").toISOString(),
      end: T("11:00:00").toISOString(),
      quantity: 300,
    };
    await ledger.record([record]);
    expect((await sum(alice, "00:00:00", "23:00:00", "storage")).amount).toBeCloseTo(300, 6);
    expect((await sum(alice, "10:00:00", "10:20:00", "storage")).amount).toBeCloseTo(100, 6);
  });

  it("usage ledger - a record stored between the sum and the lookup of pending keys is in both or in neither (one snapshot)", async () => {
    const late = gpu(alice, "10:00:00", "10:00:30");
    // Every query of the ledger under test, its pool's and its clients', passes here first: just before
    // the key lookup runs, another writer stores the record (as the usage consumer does at any moment).
    let stored = false;
    const beforeQuery = async (text: unknown) => {
      if (!stored && String(text).includes("WHERE key = ANY")) {
        stored = true;
        expect(await new LedgerRepository(pool).record([late])).toBe(1);
      }
    };
    const intercept = <T extends Pool | PoolClient>(db: T): T =>
      new Proxy(db, {
        get(target, prop) {
          if (prop === "query")
            return async (...args: unknown[]) => {
              await beforeQuery(typeof args[0] === "string" ? args[0] : (args[0] as { text?: string })?.text);
              return (target.query as (...a: unknown[]) => unknown).apply(target, args);
            };
          if (prop === "connect") return async () => intercept(await (target as Pool).connect());
          const value = Reflect.get(target, prop, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    const { totals, recorded } = await new LedgerRepository(intercept(pool)).totalsAndRecorded([alice], T("00:00:00"), T("23:00:00"), [late.key]);
    expect(stored).toBe(true);
    const summed = totals.filter((t) => t.resource === "gpu").reduce((a, t) => a + t.amount, 0);
    // Read before the write: neither summed nor recorded, so the caller counts it as pending, once.
    expect([summed, recorded.has(late.key)]).toEqual([0, false]);
    // Afterwards both see it.
    const after = await ledger.totalsAndRecorded([alice], T("00:00:00"), T("23:00:00"), [late.key]);
    expect([after.totals.reduce((a, t) => a + t.amount, 0), after.recorded.has(late.key)]).toEqual([expect.closeTo(30, 6), true]);
  });
});
