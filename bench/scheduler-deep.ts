/**
 * bench:scheduler's deep-queue and fairness modes (BENCH_MODE=deep, fair), on one cluster:
 * - deep: BENCH_DEEP_ACCOUNTS (100) accounts × BENCH_DEEP_JOBS (200) no-op jobs: jobs/s from first
 *   submit to last completed, POST p50/p99, rows read per job; then, with every card held by
 *   long jobs, GET /api/gpu/status latency at queue depth 0, 5k, 10k, 20k (goal: flat, within 1.5×
 *   of depth 0) and the rows one placement pass reads at full depth; then the queue drains. The
 *   per-job cost budget (bench/lib/job-cost.ts) of the run at depth 0, of each submit step and of
 *   the drain; index entries per job must stay flat from depth 0 to the drain's depth.
 * - fair: 10 accounts with equal demand of `sleep BENCH_FAIR_RUNTIME_S` jobs (2 s): Jain's index of
 *   their GPU-seconds (goal ≥ 0.95) while all of them still wait, and how long a fresh account's
 *   first job waits while they hold 2,000 queued jobs (goal: at most one job's runtime).
 * Rows read come from PostgreSQL's statistics views (pg_stat_user_tables / pg_stat_user_indexes:
 * seq_tup_read, idx_tup_read of the jobs table; pg_stat_statements is not loaded here) and from
 * EXPLAIN (ANALYZE, BUFFERS) of the placement snapshot.
 */
import { Client, Pool } from "pg";
import { JobsRepository } from "../services/gpu-scheduler/store/jobs.repository";
import { PlacementRepository, SNAPSHOT_PLANNING, snapshotSql } from "../services/gpu-scheduler/store/placement.repository";
import { waitFor } from "../test/support/platform";
import { budgetLines, indexEntries, JobCost, jobCost, windowS } from "./lib/job-cost";
import { Call, CARDS_PER_NODE, Cluster, completed, CONCURRENCY, drained, fmt, now, quantile, times, verdict } from "./scheduler-cluster";

const DEEP_ACCOUNTS = Number(process.env.BENCH_DEEP_ACCOUNTS || 100);
const DEEP_JOBS = Number(process.env.BENCH_DEEP_JOBS || 200);
const FAIR_ACCOUNTS = 10;
const FAIR_RUNTIME_S = Number(process.env.BENCH_FAIR_RUNTIME_S || 2);
const FAIR_QUEUED = Number(process.env.BENCH_FAIR_QUEUED || 2000);
const STATUS_SAMPLES = 100;
const HOLD = "sleep 3600";

/** Runs `work` over `items` with CONCURRENCY workers. */
async function pool<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/** Submits `perAccount` jobs of each account, the accounts taking turns; ids in order and POST latencies. */
async function submitAll(accounts: Call[], perAccount: number, command: string): Promise<{ ids: string[]; postMs: number[] }> {
  const ids: string[] = [];
  const postMs: number[] = [];
  const order = Array.from({ length: perAccount * accounts.length }, (_, i) => accounts[i % accounts.length]);
  await pool(order, async (call) => {
    const t0 = now();
    const res = await call("POST", "/api/gpu/jobs", { command });
    if (res.status !== 201) throw new Error(`POST /api/gpu/jobs: ${res.status} ${JSON.stringify(res.body)}`);
    postMs.push(now() - t0);
    ids.push(res.body.id);
  });
  return { ids, postMs: postMs.sort((a, b) => a - b) };
}

async function accountsOf(cluster: Cluster, n: number, prefix: string): Promise<Call[]> {
  const calls: Call[] = [];
  for (let i = 0; i < n; i += 8)
    calls.push(...(await Promise.all(Array.from({ length: Math.min(8, n - i) }, (_, k) => cluster.account(`${prefix}-${i + k}`)))));
  return calls;
}

/** Rows the jobs table gave out so far (statistics views), and its updates. */
async function tableStats(db: Client) {
  // Backends report their counts about once a second.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const { rows } = await db.query<{ seq: string; idx: string; upd: string; hot: string; dead: string }>(
    `SELECT t.seq_tup_read AS seq, (SELECT sum(i.idx_tup_read) FROM pg_stat_user_indexes i WHERE i.relid = t.relid) AS idx,
       t.n_tup_upd AS upd, t.n_tup_hot_upd AS hot, t.n_dead_tup AS dead
     FROM pg_stat_user_tables t WHERE t.relid = 'gpu_scheduler.jobs'::regclass`,
  );
  return { seq: Number(rows[0].seq), idx: Number(rows[0].idx), upd: Number(rows[0].upd), dead: Number(rows[0].dead) };
}
const perJob = (a: Awaited<ReturnType<typeof tableStats>>, b: typeof a, jobs: number) =>
  `${fmt((b.seq - a.seq) / jobs)} by sequential scans + ${fmt((b.idx - a.idx) / jobs)} index entries, ${fmt((b.upd - a.upd) / jobs)} updates`;

type PlanNode = { [k: string]: unknown; Plans?: PlanNode[] };
/** Rows a plan's scans read (returned and filtered out, times their loops). */
const rowsRead = (n: PlanNode): number =>
  (/Scan$/.test(String(n["Node Type"])) && n["Node Type"] !== "CTE Scan" && n["Node Type"] !== "Subquery Scan"
    ? (Number(n["Actual Rows"] ?? 0) + Number(n["Rows Removed by Filter"] ?? 0)) * Number(n["Actual Loops"] ?? 1)
    : 0) + (n.Plans ?? []).reduce((s, c) => s + rowsRead(c), 0);

/** One placement snapshot read for `cards` cards (those beyond the held ones are free), EXPLAIN ANALYZEd. */
async function snapshotCost(db: Client, cards: number): Promise<string> {
  // Planned as the placement transaction plans it.
  const results = (await db.query(
    `BEGIN; ${SNAPSHOT_PLANNING}; PREPARE snapshot AS ${snapshotSql(3600)};
     EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE snapshot(now(), ${Number(cards)}); ROLLBACK; DEALLOCATE snapshot`,
  )) as unknown as Array<{ rows: Array<{ "QUERY PLAN": any[] }> }>;
  const plan = results[results.length - 3].rows[0]["QUERY PLAN"][0];
  const buffers = Number(plan.Plan["Shared Hit Blocks"] ?? 0) + Number(plan.Plan["Shared Read Blocks"] ?? 0);
  return `${rowsRead(plan.Plan)} rows read, ${buffers} buffers, ${fmt(plan["Execution Time"], 2)} ms`;
}

/** Every card held by a long job of one account; `release` cancels them. */
async function holdAllCards(cluster: Cluster, db: Client): Promise<{ release(): Promise<void> }> {
  const cards = cluster.nodes * CARDS_PER_NODE;
  const [blocker] = await accountsOf(cluster, 1, `blocker-${Date.now()}`);
  const { ids } = await submitAll([blocker], cards, HOLD);
  await waitFor(
    async () =>
      (await db.query(`SELECT count(*)::int AS n FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[]) AND started_at IS NOT NULL`, [ids])).rows[0].n === cards,
    { timeoutMs: 120_000, intervalMs: 200, message: `${cards} holding jobs running` },
  );
  return { release: () => pool(ids, async (id) => void (await blocker("POST", `/api/gpu/jobs/${id}/cancel`))) };
}

/**
 * GET /api/gpu/status latency, and the same reads the action makes (held cards, queue depth) timed
 * on their own from here: the database's part, apart from the load the machine is under.
 */
async function statusLatency(call: Call, pool: Pool): Promise<{ p50: number; p99: number; depth: number; dbP50: number }> {
  const ms: number[] = [];
  const dbMs: number[] = [];
  const repo = new JobsRepository(pool);
  const places = new PlacementRepository(pool);
  let depth = 0;
  for (let i = 0; i < STATUS_SAMPLES; i++) {
    const t0 = now();
    const res = await call("GET", "/api/gpu/status");
    ms.push(now() - t0);
    depth = res.body.queueDepth;
    const t1 = now();
    await Promise.all([places.heldCards(), repo.queueDepth()]);
    dbMs.push(now() - t1);
  }
  ms.sort((a, b) => a - b);
  dbMs.sort((a, b) => a - b);
  return { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99), depth, dbP50: quantile(dbMs, 0.5) };
}

export async function runDeepQueue(cluster: Cluster): Promise<void> {
  const { db } = cluster;
  const total = DEEP_ACCOUNTS * DEEP_JOBS;
  const cards = cluster.nodes * CARDS_PER_NODE;
  console.log(`Deep queue (BENCH_MODE=deep): ${DEEP_ACCOUNTS} accounts × ${DEEP_JOBS} jobs = ${total}, ${cards} cards, ${CONCURRENCY} concurrent clients`);
  const accounts = await accountsOf(cluster, DEEP_ACCOUNTS, "deep");

  // 1. Submit → completed on free cards.
  const before = await tableStats(db);
  const costBefore = await cluster.meter.snapshot();
  const first = now();
  const run = await submitAll(accounts, DEEP_JOBS, "true");
  await drained(db);
  const costAfter = await cluster.meter.snapshot();
  const after = await tableStats(db);
  await completed(db, run.ids);
  const lastCompleted = Math.max(...(await times(db, run.ids)).map((r) => r.completed));
  const jobsPerS = total / ((lastCompleted - first) / 1000);
  console.log(`  ${fmt(jobsPerS, 0)} jobs/s from first submit to last completed (goal ≥ 1000: ${verdict(jobsPerS >= 1000)})`);
  console.log(`  POST p50 ${fmt(quantile(run.postMs, 0.5))} ms, p99 ${fmt(quantile(run.postMs, 0.99))} ms`);
  console.log(`  jobs table per job: ${perJob(before, after, total)}`);
  const shallow = jobCost(costBefore, costAfter, total);
  console.log(budgetLines(shallow, total, windowS(costBefore, costAfter), "At depth 0, per job").join("\n"));

  // 2. Every card busy: the queue only grows; status latency by depth.
  const hold = await holdAllCards(cluster, db);
  const probe = accounts[0];
  const depths = [0, 5000, 10000, 20000].map((d) => Math.round((d * total) / 20000));
  const measured: Array<{ depth: number; p50: number; p99: number; dbP50: number }> = [];
  const pool = new Pool({ connectionString: cluster.databaseUrl, max: 2 });
  let queued = 0;
  let lastSubmit: JobCost | undefined;
  const queuedIds: string[] = [];
  for (const depth of depths) {
    const perAccount = Math.round((depth - queued) / DEEP_ACCOUNTS);
    if (perAccount > 0) {
      const stepBefore = await cluster.meter.snapshot();
      const step = await submitAll(accounts, perAccount, "true");
      const stepAfter = await cluster.meter.snapshot();
      queuedIds.push(...step.ids);
      const from = queued;
      queued += perAccount * DEEP_ACCOUNTS;
      console.log(`  to depth ${queued}: POST p50 ${fmt(quantile(step.postMs, 0.5))} ms, p99 ${fmt(quantile(step.postMs, 0.99))} ms`);
      const cost = jobCost(stepBefore, stepAfter, step.ids.length);
      lastSubmit = cost;
      // Submits only (no card is free): what one submit costs at this depth, placement passes included.
      console.log(
        `    per submit from depth ${from}: ${fmt(cost.cpuMs, 2)} ms platform CPU, ${fmt(cost.roundTrips)} SQL round trips, ${fmt(cost.published)} bus messages, ${fmt(indexEntries(cost))} index entries read`,
      );
    }
    measured.push(await statusLatency(probe, pool));
  }
  await pool.end();
  const base = measured[0].p50;
  for (const m of measured)
    console.log(
      `  GET /api/gpu/status at depth ${m.depth}: p50 ${fmt(m.p50, 2)} ms, p99 ${fmt(m.p99, 2)} ms (${fmt(m.p50 / base, 2)}× depth 0); its reads alone p50 ${fmt(m.dbP50, 2)} ms (${fmt(m.dbP50 / measured[0].dbP50, 2)}×)`,
    );
  const worst = Math.max(...measured.map((m) => m.p50)) / base;
  const worstDb = Math.max(...measured.map((m) => m.dbP50)) / measured[0].dbP50;
  console.log(
    `  status latency flat: worst p50 ${fmt(worst, 2)}× depth 0 over HTTP, ${fmt(worstDb, 2)}× for its reads alone (goal ≤ 1.5×: ${verdict(worst <= 1.5)} over HTTP, ${verdict(worstDb <= 1.5)} for the reads)`,
  );
  const idle = await tableStats(db);
  const idle2 = await tableStats(db);
  console.log(`  placement snapshot at depth ${queued}, all ${cards} cards held: ${await snapshotCost(db, cards)}`);
  console.log(`  placement snapshot at depth ${queued}, 8 cards free: ${await snapshotCost(db, cards + 8)}`);
  console.log(`  jobs table during 1.5 s at full depth with no card free (passes on every tick): ${perJob(idle, idle2, 1)} in all`);

  // 3. The cards come free: the deep queue drains.
  const beforeDrain = await tableStats(db);
  const costBeforeDrain = await cluster.meter.snapshot();
  const drainStart = now();
  await hold.release();
  await drained(db);
  const costAfterDrain = await cluster.meter.snapshot();
  const afterDrain = await tableStats(db);
  await completed(db, queuedIds);
  const drainEnd = Math.max(...(await times(db, queuedIds)).map((r) => r.completed));
  console.log(
    `  drain of ${queued} queued jobs: ${fmt(queued / ((drainEnd - drainStart) / 1000), 0)} jobs/s; jobs table per job: ${perJob(beforeDrain, afterDrain, queued)}`,
  );
  // The window also holds the cancels of the cards' holding jobs (terminal events too).
  const deep = jobCost(costBeforeDrain, costAfterDrain, queued);
  const span = "placement → terminal event (submits: the steps above)";
  console.log(budgetLines(deep, queued, windowS(costBeforeDrain, costAfterDrain), `Drain from depth ${queued}, per job`, span).join("\n"));
  // A job at depth: its submit (the last step, the deepest) and its share of the drain, against a whole job at depth 0.
  const atDepth = indexEntries(deep) + (lastSubmit ? indexEntries(lastSubmit) : 0);
  const ratio = atDepth / indexEntries(shallow);
  console.log(
    `  index entries read per job, submit → terminal: at depth 0 ${fmt(indexEntries(shallow))}; at depth ${queued}, ${fmt(lastSubmit ? indexEntries(lastSubmit) : 0)} per submit of the last step + ${fmt(indexEntries(deep))} per drained job = ${fmt(atDepth)}, ${fmt(ratio, 2)}× depth 0 (goal: flat, within 1.5×: ${verdict(ratio <= 1.5)})\n`,
  );
}

/** Jain's fairness index of `x`: 1 when all are equal, 1/n when one has everything. */
export const jain = (x: number[]) => x.reduce((a, b) => a + b, 0) ** 2 / (x.length * x.reduce((a, b) => a + b * b, 0));

export async function runFairness(cluster: Cluster): Promise<void> {
  const { db } = cluster;
  const cards = cluster.nodes * CARDS_PER_NODE;
  // Two rounds of every card beyond the 2,000 queued: about that many still wait when the fresh job comes.
  const perAccount = Math.ceil((2 * cards + FAIR_QUEUED) / FAIR_ACCOUNTS);
  console.log(`Fairness (BENCH_MODE=fair): ${FAIR_ACCOUNTS} accounts × ${perAccount} jobs of ${FAIR_RUNTIME_S} s, ${cards} cards`);
  const accounts = await accountsOf(cluster, FAIR_ACCOUNTS, "fair");
  const [fresh] = await accountsOf(cluster, 1, "fresh");
  // Equal demand from the start: everything is queued while the cards are held, then released.
  const hold = await holdAllCards(cluster, db);
  const { ids } = await submitAll(accounts, perAccount, `sleep ${FAIR_RUNTIME_S}`);
  await hold.release();
  await waitFor(
    async () =>
      (await db.query(`SELECT count(*)::int AS n FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[]) AND started_at IS NOT NULL`, [ids])).rows[0].n >= cards,
    { timeoutMs: 60_000, intervalMs: 50, message: "every card busy with the accounts' jobs" },
  );
  const waiting = (await db.query(`SELECT count(*)::int AS n FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[]) AND status = 'queued'`, [ids])).rows[0].n;
  const freshRes = await fresh("POST", "/api/gpu/jobs", { command: `sleep ${FAIR_RUNTIME_S}` });
  await completed(db, [...ids, freshRes.body.id], 300_000);

  const rows = await times(db, ids);
  const [freshRow] = await times(db, [freshRes.body.id]);
  // The window: from the first start until the first account has started its last job (all still wait until then).
  const byAccount = new Map<string, typeof rows>();
  for (const r of rows) byAccount.set(r.client_id, [...(byAccount.get(r.client_id) ?? []), r]);
  const t0 = Math.min(...rows.map((r) => r.started));
  const t1 = Math.min(...[...byAccount.values()].map((list) => Math.max(...list.map((r) => r.started))));
  const used = [...byAccount.values()].map((list) => list.reduce((s, r) => s + Math.max(0, Math.min(r.completed, t1) - Math.max(r.started, t0)), 0) / 1000);
  const index = jain(used);
  console.log(
    `  Jain's index of GPU-seconds over ${FAIR_ACCOUNTS} accounts, ${fmt((t1 - t0) / 1000)} s while all wait: ${fmt(index, 3)} (goal ≥ 0.95: ${verdict(index >= 0.95)})`,
  );
  console.log(`  GPU-seconds per account: min ${fmt(Math.min(...used))}, max ${fmt(Math.max(...used))}`);
  const wait = (freshRow.started - freshRow.created) / 1000;
  console.log(
    `  a fresh account's first job, submitted behind ${waiting} queued jobs of the others: started after ${fmt(wait, 2)} s (goal ≤ ${FAIR_RUNTIME_S} s, one job's runtime: ${verdict(wait <= FAIR_RUNTIME_S)})\n`,
  );
}
