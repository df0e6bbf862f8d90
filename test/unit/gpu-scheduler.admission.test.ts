/** Admission of a batch of submissions (queued-jobs limit, places within each account) and the history's decisions: tables. */
import { admit, aheadInAccount } from "../../services/gpu-scheduler/core/admission";
import { historyCutoffs, HISTORY_BATCH, JobHistory, tableUpkeep } from "../../services/gpu-scheduler/loop/job-history";

const queued = (counts: Record<string, Record<number, number>>) =>
  new Map(Object.entries(counts).map(([c, byPriority]) => [c, new Map(Object.entries(byPriority).map(([p, n]) => [Number(p), n]))]));

describe("gpu-scheduler admission - decisions", () => {
  test.each([
    ["under the limit: all admitted", { a: { 1: 3 } }, ["a1", "a2"], 10, ["a1", "a2"], {}],
    ["the batch reaches the limit: its first ones win", { a: { 1: 8 } }, ["a1", "a2", "a3"], 10, ["a1", "a2"], { a3: 10 }],
    ["already at the limit (counted over every priority)", { a: { 0: 4, 2: 6 } }, ["a1"], 10, [], { a1: 10 }],
    ["accounts are counted apart", { a: { 1: 10 } }, ["a1", "b1", "b2"], 10, ["b1", "b2"], { a1: 10 }],
    ["an account with nothing queued", {}, ["b1"], 1, ["b1"], {}],
  ])("gpu-scheduler admission - %s", (_name, counts, ids, limit, admitted, refusedUsed) => {
    const jobs = ids.map((id) => ({ id, clientId: id[0] }));
    const out = admit(jobs, queued(counts), () => limit);
    expect(out.admitted.map((j) => j.id)).toEqual(admitted);
    expect(Object.fromEntries(out.refused)).toEqual(Object.fromEntries(Object.entries(refusedUsed).map(([id, used]) => [id, { limit, used }])));
  });

  test("gpu-scheduler admission - each account's limit is its own", () => {
    const out = admit(
      [
        { id: "a1", clientId: "a" },
        { id: "b1", clientId: "b" },
      ],
      new Map(),
      (c) => (c === "a" ? 0 : 5),
    );
    expect(out.admitted.map((j) => j.id)).toEqual(["b1"]);
    expect(out.refused.get("a1")).toEqual({ limit: 0, used: 0 });
  });

  test.each([
    [
      "normal jobs after the account's queue, in batch order",
      { a: { 0: 2, 1: 3, 2: 1 } },
      [
        ["a1", 1, 10],
        ["a2", 1, 11],
      ],
      { a1: 4, a2: 5 },
    ],
    [
      "a high job passes the queued normal ones and the batch's normal ones",
      { a: { 1: 3, 2: 1 } },
      [
        ["a1", 1, 10],
        ["a2", 2, 11],
      ],
      { a1: 5, a2: 1 },
    ],
    [
      "a low job waits behind everything",
      { a: { 0: 1, 1: 3 } },
      [
        ["a1", 0, 10],
        ["a2", 1, 11],
      ],
      { a1: 5, a2: 3 },
    ],
    [
      "accounts do not count each other",
      { a: { 1: 2 } },
      [
        ["a1", 1, 10],
        ["b1", 1, 11],
      ],
      { a1: 2, b1: 0 },
    ],
  ] as const)("gpu-scheduler admission - jobs ahead in the account: %s", (_name, counts, created, expected) => {
    const jobs = created.map(([id, priority, seq]) => ({ id, clientId: id[0], priority, seq }));
    expect(Object.fromEntries(aheadInAccount(jobs, queued(counts)))).toEqual(expected);
  });
});

describe("gpu-scheduler job history - decisions", () => {
  const now = new Date("2026-01-31T00:00:00Z");
  test.each([
    ["archive after 300 s, keep 30 days", 300, 30, "2026-01-30T23:55:00.000Z", "2026-01-01T00:00:00.000Z"],
    ["retention shorter than the archive delay: archived when due for removal", 7200, 1 / 24, "2026-01-30T23:00:00.000Z", "2026-01-30T23:00:00.000Z"],
  ])("gpu-scheduler job history - cutoffs: %s", (_name, archiveAfterS, retentionDays, archiveBefore, purgeBefore) => {
    const cut = historyCutoffs(now, { archiveAfterS, retentionDays });
    expect({ archive: cut.archiveBefore.toISOString(), purge: cut.purgeBefore.toISOString() }).toEqual({ archive: archiveBefore, purge: purgeBefore });
  });

  const s = { vacuumRows: 5000, vacuumIntervalS: 10 };
  const t = now.getTime();
  const ago = (ms: number) => new Date(t - ms);
  test.each([
    ["few dead or changed rows", 4999, 4999, null, null, s, null],
    ["many dead rows, never vacuumed", 5000, 0, null, null, s, "vacuum"],
    ["many dead rows, vacuumed 5 s ago (by anyone)", 9000, 0, ago(5000), null, s, null],
    ["many dead rows, vacuumed 10 s ago", 9000, 0, ago(10_000), null, s, "vacuum"],
    ["many changed rows (a queue filled since the statistics), analyzed 20 s ago", 0, 8000, null, ago(20_000), s, "analyze"],
    ["many changed rows, analyzed 1 s ago", 0, 8000, null, ago(1000), s, null],
    ["vacuum not due yet, analyze due", 9000, 9000, ago(1000), ago(60_000), s, "analyze"],
    ["turned off (0)", 1e9, 1e9, null, null, { ...s, vacuumRows: 0 }, null],
  ] as const)("gpu-scheduler job history - table upkeep: %s", (_name, deadRows, changedRows, lastVacuumAt, lastAnalyzeAt, settings, expected) => {
    expect(tableUpkeep({ deadRows, changedRows, lastVacuumAt, lastAnalyzeAt }, t, settings)).toBe(expected);
  });

  test("gpu-scheduler job history - a pass archives and removes (jobs, then settled webhook deliveries past retention) in bounded batches, continues only while batches are full, and vacuums when due", async () => {
    const calls: string[] = [];
    let archivable = HISTORY_BATCH * 2 + 10;
    const repo = {
      archive: async () => {
        const n = Math.min(HISTORY_BATCH, archivable);
        archivable -= n;
        calls.push(`archive ${n}`);
        return n;
      },
      purge: async () => (calls.push("purge 0"), 0),
      purgeDeliveries: async (before: Date) => (calls.push(`deliveries before ${before.toISOString()}`), 0),
      dropEmptyCounters: async () => (calls.push("drop"), 0),
      vacuumStats: async () => ({ deadRows: 6000, changedRows: 0, lastVacuumAt: null, lastAnalyzeAt: null }),
      vacuum: async (analyzeOnly?: boolean) => void calls.push(analyzeOnly ? "analyze" : "vacuum"),
    };
    const history = new JobHistory(repo, { archiveAfterS: 300, retentionDays: 30, ...s }, { now: () => now }, { info: () => undefined });
    await Promise.all([history.run(), history.run()]); // the second call finds one running: nothing
    const purgeBefore = new Date(now.getTime() - 30 * 86_400_000).toISOString();
    expect(calls).toEqual([
      `archive ${HISTORY_BATCH}`,
      `archive ${HISTORY_BATCH}`,
      "archive 10",
      "purge 0",
      `deliveries before ${purgeBefore}`,
      "drop",
      "vacuum",
    ]);
  });
});
