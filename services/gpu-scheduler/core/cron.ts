/**
 * Five-field cron expressions (minute hour day-of-month month day-of-week) in an IANA time zone,
 * and their next run after an instant. Pure: the zone's offsets come from Intl. Fields take `*`,
 * numbers, `a-b`, `/step` and comma lists; months and days also take their English names
 * (`jan`, `mon`); day-of-week 0 and 7 are Sunday. When both day fields are restricted, a day
 * matching either runs (as Vixie cron). Across daylight-saving changes a wall-clock time that does
 * not exist that day (spring forward) is skipped, and one that happens twice (fall back) runs once,
 * at its first occurrence.
 */

type Field = { name: string; min: number; max: number; names?: readonly string[] };

const FIELDS: readonly Field[] = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"] },
  { name: "day of week", min: 0, max: 7, names: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] },
];

export type Cron = {
  minutes: number[];
  hours: number[];
  days: Set<number>;
  months: Set<number>;
  weekdays: Set<number>;
  /** The day fields restricted (not `*`): with both, a day matching either runs. */
  dayRestricted: boolean;
  weekdayRestricted: boolean;
};

export type CronParse = { ok: true; cron: Cron } | { ok: false; message: string };

function parseValue(text: string, field: Field): number | null {
  const named = field.names?.indexOf(text.toLowerCase()) ?? -1;
  if (named >= 0) return named + (field.names!.length === 12 ? 1 : 0);
  if (!/^\d{1,2}$/.test(text)) return null;
  const n = Number(text);
  return n >= field.min && n <= field.max ? n : null;
}

function parseField(text: string, field: Field): number[] | string {
  const values = new Set<number>();
  for (const part of text.split(",")) {
    const m = /^([^/]+)(?:\/(\d{1,2}))?$/.exec(part);
    if (!m) return `'${part}' is not a ${field.name}`;
    const step = m[2] === undefined ? 1 : Number(m[2]);
    if (step < 1) return `the step of '${part}' must be at least 1`;
    let from: number | null;
    let to: number | null;
    if (m[1] === "*") [from, to] = [field.min, field.max];
    else if (m[1].includes("-")) {
      const [a, b, ...rest] = m[1].split("-");
      [from, to] = rest.length ? [null, null] : [parseValue(a, field), parseValue(b, field)];
    } else {
      from = parseValue(m[1], field);
      to = m[2] === undefined ? from : field.max; // `a/n`: from a to the end, every n
    }
    if (from === null || to === null) return `'${part}' is not a ${field.name} (${field.min}–${field.max})`;
    if (from > to) return `the range '${part}' runs backwards`;
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return [...values].sort((a, b) => a - b);
}

/** Parses a five-field expression; the message names the field that is wrong. */
export function parseCron(expression: string): CronParse {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5 || parts[0] === "") return { ok: false, message: "a cron expression has 5 fields: minute hour day-of-month month day-of-week" };
  const parsed: number[][] = [];
  for (let i = 0; i < 5; i++) {
    const values = parseField(parts[i], FIELDS[i]);
    if (typeof values === "string") return { ok: false, message: `${FIELDS[i].name}: ${values}` };
    parsed.push(values);
  }
  const weekdays = new Set(parsed[4].map((d) => d % 7));
  return {
    ok: true,
    cron: {
      minutes: parsed[0],
      hours: parsed[1],
      days: new Set(parsed[2]),
      months: new Set(parsed[3]),
      weekdays,
      dayRestricted: !parts[2].startsWith("*"),
      weekdayRestricted: !parts[4].startsWith("*"),
    },
  };
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Whether `timeZone` is a zone Intl knows (IANA names, `UTC`). */
export function isTimeZone(timeZone: string): boolean {
  if (!timeZone || timeZone.length > 64) return false;
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** The wall-clock time in `timeZone` at `ms`, as if it were UTC (milliseconds). */
function wallMs(ms: number, timeZone: string): number {
  const p: Record<string, number> = {};
  for (const { type, value } of formatter(timeZone).formatToParts(new Date(ms))) if (type !== "literal") p[type] = Number(value);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
}

/** The first instant whose wall clock in `timeZone` reads `wall` (as UTC ms), or null in a gap. */
function instantOf(wall: number, timeZone: string): number | null {
  const offsets = new Set([wallMs(wall - 12 * 3600_000, timeZone) - (wall - 12 * 3600_000), wallMs(wall + 12 * 3600_000, timeZone) - (wall + 12 * 3600_000)]);
  const found = [...offsets].map((o) => wall - o).filter((t) => wallMs(t, timeZone) === wall);
  return found.length ? Math.min(...found) : null;
}

/** Look this many days ahead for a run at most (a February 29 at a weekday may take years). */
const HORIZON_DAYS = 366 * 8;
const DAY_MS = 24 * 3600_000;

/** The first run strictly after `after`, or null when the expression never runs (e.g. February 30). */
export function nextRun(cron: Cron, timeZone: string, after: Date): Date | null {
  const afterMs = after.getTime();
  const startWall = wallMs(afterMs, timeZone);
  const startDay = Math.floor(startWall / DAY_MS) * DAY_MS;
  for (let d = 0; d < HORIZON_DAYS; d++) {
    const day = new Date(startDay + d * DAY_MS);
    if (!cron.months.has(day.getUTCMonth() + 1)) continue;
    const byDay = cron.days.has(day.getUTCDate());
    const byWeekday = cron.weekdays.has(day.getUTCDay());
    const dayMatches = cron.dayRestricted && cron.weekdayRestricted ? byDay || byWeekday : byDay && byWeekday;
    if (!dayMatches) continue;
    for (const h of cron.hours)
      for (const m of cron.minutes) {
        const wall = day.getTime() + h * 3600_000 + m * 60_000;
        // A wall clock more than a daylight-saving shift before the start cannot be after it.
        if (wall < startWall - 3 * 3600_000) continue;
        const t = instantOf(wall, timeZone);
        if (t !== null && t > afterMs) return new Date(t);
      }
  }
  return null;
}
