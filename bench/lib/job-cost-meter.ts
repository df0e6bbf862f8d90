/**
 * Reads the per-job cost budget of issue 34 at one instant: the CPU of the platform's process trees
 * (/proc/<pid>/stat: user + system time, the same as process.cpuUsage(), of each process and of
 * what it started, e.g. the resident launcher; and what they reaped: the jobs' processes), the CPU
 * of the PostgreSQL backends serving the bench's database (/proc of their pids), the counts of
 * bench/lib/job-cost-probe.ts in every platform process, and PostgreSQL's statistics views.
 * `jobCost(before, after, jobs)` (bench/lib/job-cost.ts) turns two readings into the figures.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import type { Client } from "pg";
import { CostSnapshot, ProcessCounts, procStatTicks, Reading, sumCounts, TableCounts } from "./job-cost";

/** The node arguments that load the probe (after `--import tsx`). */
export const PROBE_ARGS = ["--import", path.join(__dirname, "job-cost-probe.ts")];
const TICK_MS = 10; // USER_HZ is 100 on Linux.
const STATS_DELAY_MS = 1500;

const readStat = (pid: number | string) => {
  try {
    return procStatTicks(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return undefined;
  }
};

/** Every process under /proc: its parent and CPU ticks. */
function processTable(): Map<number, ReturnType<typeof procStatTicks>> {
  const table = new Map<number, ReturnType<typeof procStatTicks>>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(name);
    if (stat) table.set(Number(name), stat);
  }
  return table;
}

/** The counts one probe answers on its socket; undefined when its process is gone. */
const probeCounts = (socket: string) =>
  new Promise<ProcessCounts | undefined>((resolve) => {
    let text = "";
    const conn = net.connect(socket);
    conn.setEncoding("utf8");
    conn.on("data", (d) => (text += d));
    conn.on("end", () => resolve(text ? (JSON.parse(text) as ProcessCounts) : undefined));
    conn.on("error", () => resolve(undefined));
  });

/**
 * Jobs queued, placed or running, from the scheduler's counters: the bench's poll for the end of a
 * window (reading the jobs themselves would add the bench's own reads to the budget).
 */
export const jobsInProgress = async (db: Client): Promise<number> =>
  (await db.query<{ n: number }>(`SELECT COALESCE(sum(n), 0)::int AS n FROM gpu_scheduler.job_counts WHERE category IN ('queued', 'assigned', 'running')`))
    .rows[0].n;

export class JobCostMeter {
  /** BENCH_JOB_COST_DIR for the platform's processes. */
  readonly dir = mkdtempSync(path.join(os.tmpdir(), "job-cost-"));

  /** `groups`: a name for each group of platform processes → their pids (read at each snapshot). */
  constructor(
    private readonly db: Client,
    private readonly groups: () => Record<string, number[]>,
  ) {}

  /** A reading, a wait for PostgreSQL's statistics (backends send them at most once a second), a reading and the statistics. */
  async snapshot(): Promise<CostSnapshot> {
    const start = await this.reading();
    await new Promise((resolve) => setTimeout(resolve, STATS_DELAY_MS));
    return { start, end: await this.reading(), tables: await this.tables() };
  }

  private async reading(): Promise<Reading> {
    const at = performance.timeOrigin + performance.now();
    const table = processTable();
    const children = new Map<number, number[]>();
    for (const [pid, s] of table) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
    const cpuMs: Record<string, number> = {};
    let reaped = 0;
    for (const [group, roots] of Object.entries(this.groups())) {
      let ticks = 0;
      for (const root of roots) {
        const tree = [root];
        for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]) ?? []));
        for (const pid of tree) {
          ticks += table.get(pid)?.self ?? 0;
          // The root's reaped children are its own helpers; below it, what helpers reaped are jobs.
          if (pid !== root) reaped += table.get(pid)?.children ?? 0;
        }
      }
      cpuMs[group] = ticks * TICK_MS;
    }
    const sockets = readdirSync(this.dir).filter((f) => f.endsWith(".sock"));
    const counts = sumCounts((await Promise.all(sockets.map((f) => probeCounts(path.join(this.dir, f))))).filter((c) => c !== undefined));
    return { at, cpuMs, reapedCpuMs: reaped * TICK_MS, postgresCpuMs: await this.postgresCpu(), counts };
  }

  /** CPU of the backends of the bench's database, the bench's own connection left out; undefined if /proc does not show them. */
  private async postgresCpu(): Promise<Record<string, number> | undefined> {
    const { rows } = await this.db.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
    );
    const out: Record<string, number> = {};
    for (const { pid } of rows) {
      const stat = readStat(pid);
      if (!stat) return undefined;
      out[pid] = stat.self * TICK_MS;
    }
    return out;
  }

  private async tables(): Promise<TableCounts> {
    const { rows } = await this.db.query<Record<keyof TableCounts, string>>(
      `SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()) AS xacts,
         (SELECT COALESCE(sum(idx_tup_read), 0) FROM pg_stat_user_indexes) AS "idxTupRead",
         COALESCE(sum(idx_scan), 0) AS "idxScans", COALESCE(sum(idx_tup_fetch), 0) AS "idxTupFetch",
         COALESCE(sum(seq_tup_read), 0) AS "seqTupRead", COALESCE(sum(n_tup_ins), 0) AS ins,
         COALESCE(sum(n_tup_upd), 0) AS upd, COALESCE(sum(n_tup_del), 0) AS del
       FROM pg_stat_user_tables`,
    );
    return Object.fromEntries(Object.entries(rows[0]).map(([k, v]) => [k, Number(v)])) as TableCounts;
  }

  close(): void {
    // BENCH_JOB_COST_TEXTS=1: the statements' counts stay for reading (bench/lib/job-cost-probe.ts).
    if (process.env.BENCH_JOB_COST_TEXTS === "1") console.log(`  statement counts kept in ${this.dir}`);
    else rmSync(this.dir, { recursive: true, force: true });
  }
}
