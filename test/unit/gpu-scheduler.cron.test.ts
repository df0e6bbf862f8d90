import { isTimeZone, nextRun, parseCron } from "../../services/gpu-scheduler/core/cron";

const next = (expression: string, timeZone: string, after: string): string | null => {
  const parsed = parseCron(expression);
  if (!parsed.ok) throw new Error(parsed.message);
  return nextRun(parsed.cron, timeZone, new Date(after))?.toISOString() ?? null;
};

describe("cron - next run", () => {
  const cases: Array<[name: string, expression: string, zone: string, after: string, expected: string | null]> = [
    ["every minute: the next whole minute", "* * * * *", "UTC", "2026-03-01T10:00:30Z", "2026-03-01T10:01:00.000Z"],
    ["strictly after: a run at exactly `after` is not next", "*/15 * * * *", "UTC", "2026-03-01T10:15:00Z", "2026-03-01T10:30:00.000Z"],
    ["daily at 02:30 in UTC", "30 2 * * *", "UTC", "2026-03-01T03:00:00Z", "2026-03-02T02:30:00.000Z"],
    ["ranges, lists and names", "0 9-17/4 * * mon-fri", "UTC", "2026-02-28T12:00:00Z", "2026-03-02T09:00:00.000Z"],
    ["day 7 is Sunday", "0 0 * * 7", "UTC", "2026-03-02T00:00:00Z", "2026-03-08T00:00:00.000Z"],
    ["both day fields restricted: either matches", "0 0 13 * 5", "UTC", "2026-03-01T00:00:00Z", "2026-03-06T00:00:00.000Z"],
    ["month names, year wrap", "0 0 1 jan *", "UTC", "2026-03-01T00:00:00Z", "2027-01-01T00:00:00.000Z"],
    ["February 29: years ahead", "0 12 29 2 *", "UTC", "2026-03-01T00:00:00Z", "2028-02-29T12:00:00.000Z"],
    ["never: February 30", "0 0 30 2 *", "UTC", "2026-03-01T00:00:00Z", null],
    ["a zone: 09:00 in Tokyo is 00:00 UTC", "0 9 * * *", "Asia/Tokyo", "2026-03-01T01:00:00Z", "2026-03-02T00:00:00.000Z"],
    // Europe/Berlin: 2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET.
    ["DST spring forward: before the change, 01:30 CET", "30 1 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T00:30:00.000Z"],
    ["DST spring forward: 02:30 does not exist that day and is skipped", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T00:30:00.000Z"],
    ["DST spring forward: 03:30 is CEST (UTC+2)", "30 3 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:30:00.000Z"],
    ["DST fall back: 02:30 happens twice and runs at its first", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00.000Z"],
    ["DST fall back: after the first 02:30, the second is not another run", "30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00.000Z"],
    [
      "DST fall back: every 30 minutes through the repeated hour, each wall time once",
      "*/30 2 * * *",
      "Europe/Berlin",
      "2026-10-25T00:30:00Z",
      "2026-10-26T01:00:00.000Z",
    ],
    ["America/New_York: 2026-03-08 02:30 is skipped", "30 2 8 3 *", "America/New_York", "2026-03-01T00:00:00Z", "2027-03-08T07:30:00.000Z"],
  ];
  it.each(cases)("%s", (_name, expression, zone, after, expected) => {
    expect(next(expression, zone, after)).toBe(expected);
  });
});

describe("cron - parsing", () => {
  it.each([
    ["four fields", "* * * *", "5 fields"],
    ["a minute out of range", "60 * * * *", "minute"],
    ["an hour out of range", "0 24 * * *", "hour"],
    ["day 0 of a month", "0 0 0 * *", "day of month"],
    ["a month name unknown", "0 0 1 foo *", "month"],
    ["a weekday out of range", "0 0 * * 8", "day of week"],
    ["a backwards range", "0 5-1 * * *", "backwards"],
    ["a step of 0", "*/0 * * * *", "step"],
    ["garbage", "a b c d e", "minute"],
  ])("refuses %s, naming the field", (_name, expression, part) => {
    const parsed = parseCron(expression);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.message).toContain(part);
  });

  it("time zones: IANA names and UTC are known, others are not", () => {
    expect(isTimeZone("UTC")).toBe(true);
    expect(isTimeZone("Europe/Berlin")).toBe(true);
    expect(isTimeZone("Mars/Olympus_Mons")).toBe(false);
    expect(isTimeZone("")).toBe(false);
  });
});
