/**
 * The per-job cost budget of issue 34, pure: what a platform process counts (SQL statements in a
 * query text, the kind of a bus subject), a /proc/<pid>/stat line's CPU, and the lines the benches
 * print from two snapshots. The counting runs in bench/lib/job-cost-probe.ts, the reading in
 * bench/lib/job-cost-meter.ts.
 */

/** Issue 34's goals per job, submit → terminal event. */
export const JOB_COST_GOALS = { cpuMs: 2, roundTrips: 6, busMessages: 8 };

/** What one platform process counted since it started (bench/lib/job-cost-probe.ts). */
export type ProcessCounts = {
  /** pg Client#query calls: each waits for one ReadyForQuery, i.e. one round trip. */
  roundTrips: number;
  /** SQL statements in them: a query with parameters is one, a simple-protocol text is as many as its `;`-separated parts. */
  statements: number;
  /** NATS messages this process published (PUB/HPUB), by kind (busKind). */
  published: Record<string, number>;
  /** NATS messages the server delivered to this process (MSG/HMSG), by kind. */
  delivered: Record<string, number>;
};

export const noCounts = (): ProcessCounts => ({ roundTrips: 0, statements: 0, published: {}, delivered: {} });

/**
 * Statements in a simple-protocol query text: `;`-separated parts that hold more than blanks and
 * comments. Quotes ('…', "…", $tag$…$tag$) and comments (-- …, /* … *\/) may hold a `;`.
 */
export function statementsIn(sql: string): number {
  let count = 0;
  let content = false;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    const two = sql.slice(i, i + 2);
    if (two === "--") {
      const end = sql.indexOf("\n", i);
      i = end < 0 ? sql.length : end + 1;
    } else if (two === "/*") {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? sql.length : end + 2;
    } else if (c === "'" || c === '"') {
      content = true;
      let j = i + 1;
      // A doubled quote is an escaped one: skipping both keeps the string open.
      while (j < sql.length && (sql[j] !== c || sql[j + 1] === c)) j += sql[j] === c ? 2 : 1;
      i = j + 1;
    } else if (c === "$" && /^\$[A-Za-z_]*\$/.test(sql.slice(i))) {
      content = true;
      const tag = /^\$[A-Za-z_]*\$/.exec(sql.slice(i))![0];
      const end = sql.indexOf(tag, i + tag.length);
      i = end < 0 ? sql.length : end + tag.length;
    } else if (c === ";") {
      if (content) count++;
      content = false;
      i++;
    } else {
      if (!/\s/.test(c)) content = true;
      i++;
    }
  }
  return count + (content ? 1 : 0);
}

/**
 * The kind of a NATS subject, for a breakdown of bus messages: Moleculer packets by type
 * (`MOL-<namespace>.REQ.<node>` → `REQ`), JetStream's API, acks and flow control, request replies
 * (`_INBOX.…`), and anything else (a stream's subject: a published channel message) as `stream`.
 */
export function busKind(subject: string): string {
  if (subject.startsWith("MOL")) return subject.split(".")[1] ?? "MOL";
  if (subject.startsWith("$JS.API.")) return "$JS.API";
  if (subject.startsWith("$JS.ACK.")) return "$JS.ACK";
  if (subject.startsWith("$JS.FC.")) return "$JS.FC";
  if (subject.startsWith("_INBOX.")) return "_INBOX";
  return "stream";
}

/** User and system CPU of a process, and of its reaped children, in clock ticks, from /proc/<pid>/stat. */
export function procStatTicks(stat: string): { self: number; children: number; ppid: number } {
  // The command name (field 2) may hold blanks and parentheses: fields are counted after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After the name: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
  const at = (field: number) => Number(fields[field - 3]);
  return { self: at(14) + at(15), children: at(16) + at(17), ppid: at(4) };
}

const add = (a: Record<string, number>, b: Record<string, number>, sign = 1) => {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + sign * v;
  return out;
};

/** The counts of several processes, or of one window (`b` − `a`). */
export const sumCounts = (list: ProcessCounts[]): ProcessCounts =>
  list.reduce(
    (s, c) => ({
      roundTrips: s.roundTrips + c.roundTrips,
      statements: s.statements + c.statements,
      published: add(s.published, c.published),
      delivered: add(s.delivered, c.delivered),
    }),
    noCounts(),
  );
export const diffCounts = (a: ProcessCounts, b: ProcessCounts): ProcessCounts => ({
  roundTrips: b.roundTrips - a.roundTrips,
  statements: b.statements - a.statements,
  published: add(b.published, a.published, -1),
  delivered: add(b.delivered, a.delivered, -1),
});

/** PostgreSQL's statistics of the bench's database: pg_stat_database and the sums over its user tables and indexes. */
export type TableCounts = {
  xacts: number;
  idxScans: number;
  idxTupRead: number;
  idxTupFetch: number;
  seqTupRead: number;
  ins: number;
  upd: number;
  del: number;
};

/** The platform's processes at one instant; CPU in milliseconds, `postgresCpuMs` undefined where not readable. */
export type Reading = {
  at: number;
  /** CPU of each group of platform processes (its name → ms), processes it started included. */
  cpuMs: Record<string, number>;
  /** CPU of the processes the platform's processes started and reaped (the jobs' sandboxes and commands). */
  reapedCpuMs: number;
  /** CPU of each PostgreSQL backend serving the bench's database (pid → ms). */
  postgresCpuMs?: Record<string, number>;
  counts: ProcessCounts;
};

/**
 * One snapshot (JobCostMeter.snapshot): a reading, the wait for PostgreSQL's statistics to arrive,
 * another reading and the statistics. A window runs from one snapshot's `end` to the next one's
 * `start`; the wait of the first, the platform idle, gives the rate of its background work.
 */
export type CostSnapshot = { start: Reading; end: Reading; tables: TableCounts };

const fmt = (n: number, digits = 1) => n.toFixed(digits);
const verdict = (ok: boolean) => (ok ? "meets the goal" : "misses the goal");
const total = (r: Record<string, number>) => Object.values(r).reduce((s, v) => s + v, 0);
/** The kinds above 0.05 per job, largest first. */
const byKind = (r: Record<string, number>, jobs: number) =>
  Object.entries(r)
    .filter(([, n]) => n / jobs >= 0.05)
    .sort((x, y) => y[1] - x[1])
    .map(([k, n]) => `${k} ${fmt(n / jobs)}`)
    .join(", ");

/** The figures per job of a window, for printing and comparing. */
export type JobCost = {
  cpuMs: number;
  /** Of the platform CPU and the messages published: what the window would hold at the idle rate (heartbeats, ticks). */
  idleCpuMs: number;
  idlePublished: number;
  cpuByGroup: Record<string, number>;
  reapedCpuMs: number;
  postgresCpuMs?: number;
  roundTrips: number;
  statements: number;
  published: number;
  delivered: number;
  publishedByKind: string;
  deliveredByKind: string;
  tables: TableCounts;
};

export function jobCost(a: CostSnapshot, b: CostSnapshot, jobs: number): JobCost {
  const [from, to] = [a.end, b.start];
  const counts = diffCounts(from.counts, to.counts);
  const cpuByGroup = Object.fromEntries(Object.entries(to.cpuMs).map(([k, v]) => [k, (v - (from.cpuMs[k] ?? 0)) / jobs]));
  // A backend that started in the window counts from zero; one that ended in it is lost (PostgreSQL keeps no total).
  const pg = from.postgresCpuMs && to.postgresCpuMs ? to.postgresCpuMs : undefined;
  const pgMs = pg ? Object.entries(pg).reduce((s, [pid, ms]) => s + ms - (from.postgresCpuMs![pid] ?? 0), 0) / jobs : undefined;
  const tables = Object.fromEntries(Object.entries(b.tables).map(([k, v]) => [k, (v - a.tables[k as keyof TableCounts]) / jobs])) as TableCounts;
  // The idle rate, from the wait of the first snapshot, over the window.
  const idleShare = a.end.at > a.start.at ? (to.at - from.at) / (a.end.at - a.start.at) / jobs : 0;
  const idle = diffCounts(a.start.counts, a.end.counts);
  return {
    cpuMs: total(cpuByGroup),
    idleCpuMs: (total(a.end.cpuMs) - total(a.start.cpuMs)) * idleShare,
    idlePublished: total(idle.published) * idleShare,
    cpuByGroup,
    reapedCpuMs: (to.reapedCpuMs - from.reapedCpuMs) / jobs,
    postgresCpuMs: pgMs,
    roundTrips: counts.roundTrips / jobs,
    statements: counts.statements / jobs,
    published: total(counts.published) / jobs,
    delivered: total(counts.delivered) / jobs,
    publishedByKind: byKind(counts.published, jobs),
    deliveredByKind: byKind(counts.delivered, jobs),
    tables,
  };
}

/** Index entries read per job: the figure that must stay flat in queue depth. */
export const indexEntries = (c: JobCost) => c.tables.idxTupRead;

/** Seconds of the window between two snapshots. */
export const windowS = (a: CostSnapshot, b: CostSnapshot) => (b.start.at - a.end.at) / 1000;

/** The budget's lines, under a heading that starts with `label` and names the `span` of a job measured. */
export function budgetLines(c: JobCost, jobs: number, seconds: number, label = "Per job", span = "submit → terminal event"): string[] {
  const groups = Object.entries(c.cpuByGroup)
    .map(([k, v]) => `${k} ${fmt(v, 2)}`)
    .join(", ");
  const t = c.tables;
  return [
    `${label}, ${span} (${jobs} jobs, ${fmt(seconds)} s window; background work in it included, "idle" the part the platform's idle rate accounts for):`,
    `  platform CPU ${fmt(c.cpuMs, 2)} ms (goal ≤ ${JOB_COST_GOALS.cpuMs}: ${verdict(c.cpuMs <= JOB_COST_GOALS.cpuMs)}; idle ${fmt(c.idleCpuMs, 2)}): ${groups}` +
      `${c.reapedCpuMs > 0 ? `; the jobs' own processes (sandbox and command, reaped) ${fmt(c.reapedCpuMs, 2)} ms` : ""}`,
    `  PostgreSQL backends' CPU: ${c.postgresCpuMs === undefined ? "not readable" : `${fmt(c.postgresCpuMs, 2)} ms`}`,
    `  SQL: ${fmt(c.roundTrips, 2)} round trips (goal ≤ ${JOB_COST_GOALS.roundTrips}: ${verdict(c.roundTrips <= JOB_COST_GOALS.roundTrips)}), ${fmt(c.statements)} statements, ${fmt(t.xacts)} transactions`,
    `  bus: ${fmt(c.published, 2)} messages published (goal ≤ ${JOB_COST_GOALS.busMessages}: ${verdict(c.published <= JOB_COST_GOALS.busMessages)}; idle ${fmt(c.idlePublished, 2)}), ${fmt(c.delivered)} delivered` +
      (c.published + c.delivered > 0
        ? `; published by kind: ${c.publishedByKind || "-"}; delivered: ${c.deliveredByKind || "-"}`
        : " (no transporter: one process)"),
    `  rows: ${fmt(t.idxTupRead)} index entries read in ${fmt(t.idxScans)} index scans, ${fmt(t.idxTupFetch)} rows fetched by them, ${fmt(t.seqTupRead)} by sequential scans; ${fmt(t.ins)} inserted, ${fmt(t.upd)} updated, ${fmt(t.del)} deleted`,
  ].map((line) => `  ${line}`);
}
