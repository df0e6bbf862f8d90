/** The per-job cost budget's counting and arithmetic (bench/lib/job-cost.ts): pure, no platform. */
import {
  budgetLines,
  busKind,
  CostSnapshot,
  diffCounts,
  jobCost,
  procStatTicks,
  Reading,
  statementsIn,
  sumCounts,
  TableCounts,
} from "../../bench/lib/job-cost";

const tables = { xacts: 0, idxScans: 0, idxTupRead: 0, idxTupFetch: 0, seqTupRead: 0, ins: 0, upd: 0, del: 0 };
const reading = (over: Partial<Reading>): Reading => ({
  at: 0,
  cpuMs: {},
  reapedCpuMs: 0,
  postgresCpuMs: {},
  counts: { roundTrips: 0, statements: 0, published: {}, delivered: {} },
  ...over,
});
/** A snapshot whose two readings are alike (no idle time between them). */
const snapshot = (over: Partial<Reading> & { tables?: TableCounts }): CostSnapshot => ({
  start: reading(over),
  end: reading(over),
  tables: over.tables ?? tables,
});

describe("bench job cost", () => {
  it.each([
    ["one statement", "SELECT 1", 1],
    ["a trailing semicolon", "SELECT 1;", 1],
    ["a transaction in one text", "BEGIN; UPDATE t SET a = 1; COMMIT", 3],
    ["empty parts and blanks", " ; SELECT 1;;\n ;", 1],
    ["a semicolon in a string", "SELECT ';'; SELECT 'it''s; here'", 2],
    ["a semicolon in a quoted name", 'SELECT 1 AS "a;b"', 1],
    ["a semicolon in a dollar-quoted body", "DO $$ BEGIN PERFORM 1; END $$; SELECT 2", 2],
    ["a tagged dollar quote", "SELECT $f$ ; $$ ; $f$", 1],
    ["comments only are no statement", "-- nothing; here\n/* nor; here */", 0],
    ["a comment after a statement", "SELECT 1; -- done; really", 1],
    ["an empty text", "", 0],
  ])("bench job cost - statements in a query: %s", (_name, sql, n) => {
    expect(statementsIn(sql)).toBe(n);
  });

  it.each([
    ["a Moleculer request", "MOL-bsched-1.REQ.node-1", "REQ"],
    ["a Moleculer heartbeat", "MOL-ns.HEARTBEAT", "HEARTBEAT"],
    ["a Moleculer balanced event", "MOL.EVENTB.gpu-node.job", "EVENTB"],
    ["JetStream's API", "$JS.API.CONSUMER.MSG.NEXT.s.c", "$JS.API"],
    ["a JetStream ack", "$JS.ACK.s.c.1.2.3.4.0", "$JS.ACK"],
    ["JetStream flow control", "$JS.FC.s.x.y", "$JS.FC"],
    ["a request's reply", "_INBOX.abc.1", "_INBOX"],
    ["a stream's subject", "bsched-1.gpu.job-events.node-1", "stream"],
  ])("bench job cost - kind of a bus subject: %s", (_name, subject, kind) => {
    expect(busKind(subject)).toBe(kind);
  });

  it.each([
    ["a plain name", "42 (node) S 7 42 42 0 -1 4194304 100 0 0 0 150 50 3 4 20 0 11 0 9 0 0", { self: 200, children: 7, ppid: 7 }],
    ["a name with blanks and parentheses", "43 (a (b) c) R 1 43 43 0 -1 0 0 0 0 0 5 6 0 1 20 0", { self: 11, children: 1, ppid: 1 }],
  ])("bench job cost - CPU ticks of a /proc stat line: %s", (_name, line, ticks) => {
    expect(procStatTicks(line)).toEqual(ticks);
  });

  it("bench job cost - counts summed over processes and differenced over a window", () => {
    const a = { roundTrips: 2, statements: 3, published: { REQ: 1 }, delivered: {} };
    const b = { roundTrips: 5, statements: 9, published: { REQ: 2, $JS_ACK: 4 }, delivered: { RES: 1 } };
    expect(sumCounts([a, b])).toEqual({ roundTrips: 7, statements: 12, published: { REQ: 3, $JS_ACK: 4 }, delivered: { RES: 1 } });
    expect(diffCounts(a, b)).toEqual({ roundTrips: 3, statements: 6, published: { REQ: 1, $JS_ACK: 4 }, delivered: { RES: 1 } });
  });

  it("bench job cost - figures per job from two readings", () => {
    const before = snapshot({
      cpuMs: { platform: 100, nodes: 50 },
      postgresCpuMs: { "10": 30, "11": 5 },
      counts: { roundTrips: 10, statements: 10, published: { REQ: 1 }, delivered: { REQ: 1 } },
      tables: { ...tables, idxTupRead: 1000, xacts: 7 },
    });
    const after = snapshot({
      cpuMs: { platform: 120, nodes: 60 },
      reapedCpuMs: 4,
      // Backend 11 ended in the window (lost), 12 started in it (counted from zero).
      postgresCpuMs: { "10": 36, "12": 2 },
      counts: { roundTrips: 22, statements: 30, published: { REQ: 9, stream: 4 }, delivered: { REQ: 5 } },
      tables: { ...tables, idxTupRead: 1400, xacts: 15 },
    });
    const cost = jobCost(before, after, 4);
    expect(cost).toMatchObject({ cpuMs: 7.5, cpuByGroup: { platform: 5, nodes: 2.5 }, reapedCpuMs: 1, postgresCpuMs: 2, roundTrips: 3, statements: 5 });
    expect(cost).toMatchObject({ published: 3, delivered: 1, publishedByKind: "REQ 2.0, stream 1.0" });
    expect(cost.tables).toMatchObject({ idxTupRead: 100, xacts: 2 });
  });

  it("bench job cost - the idle rate of the first snapshot's wait, over the window", () => {
    const idle = { roundTrips: 0, statements: 0, published: { HEARTBEAT: 2 }, delivered: {} };
    // 1 s idle: 10 ms of CPU and 2 heartbeats; then a 20 s window of 10 jobs.
    const before: CostSnapshot = {
      start: reading({ at: 0, cpuMs: { p: 100 } }),
      end: reading({ at: 1000, cpuMs: { p: 110 }, counts: idle }),
      tables,
    };
    const after = snapshot({ at: 21_000, cpuMs: { p: 310 }, counts: { ...idle, published: { HEARTBEAT: 42, REQ: 10 } } });
    expect(jobCost(before, after, 10)).toMatchObject({ cpuMs: 20, idleCpuMs: 20, published: 5, idlePublished: 4 });
  });

  it("bench job cost - PostgreSQL's CPU not readable at either end", () => {
    const cost = jobCost(snapshot({ postgresCpuMs: undefined }), snapshot({}), 1);
    expect(cost.postgresCpuMs).toBeUndefined();
    expect(budgetLines(cost, 1, 1).join("\n")).toMatch(/PostgreSQL backends' CPU: not readable/);
  });

  it.each([
    ["within the goals", { cpuMs: { p: 2 }, counts: { roundTrips: 6, statements: 6, published: { REQ: 8 }, delivered: {} } }, 0],
    ["over every goal", { cpuMs: { p: 3 }, counts: { roundTrips: 7, statements: 7, published: { REQ: 9 }, delivered: {} } }, 3],
  ])("bench job cost - the goals' verdicts: %s", (_name, after, misses) => {
    const text = budgetLines(jobCost(snapshot({}), snapshot(after), 1), 1, 1).join("\n");
    expect(text.match(/misses the goal/g)?.length ?? 0).toBe(misses);
    expect(text.match(/meets the goal/g)?.length ?? 0).toBe(3 - misses);
  });
});
