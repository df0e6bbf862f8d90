/**
 * bench:scheduler — a simulated cluster of 100 gpu-nodes × 8 cards over real NATS, jobs submitted
 * through the HTTP gateway:
 * - latency: POST → running on an idle card (one job at a time), p50 / p99; goals ≤ 15 / ≤ 50 ms;
 * - throughput: jobs from first submit to last completed, at 64 concurrent clients; goal
 *   ≥ 1,000 jobs/s. A ratio to Slurm is printed only by `npm run bench:slurm`, which runs Slurm in
 *   the same run (a published figure is no measurement of this machine);
 * - the per-job cost budget of that throughput run, submit → terminal event (bench/lib/job-cost.ts):
 *   platform CPU (goal ≤ 2 ms), PostgreSQL backends' CPU, SQL round trips (goal ≤ 6) and
 *   statements, bus messages (goal ≤ 8), index entries and rows touched.
 * Processes: gateway + auth + gpu-scheduler in one, the gpu-node brokers spread over
 * BENCH_NODE_PROCESSES hosts (bench/scheduler-nodes.ts: real gpu-node service, no-op executor),
 * this one drives HTTP and reads the job timestamps from PostgreSQL. BENCH_BUS unset (default)
 * runs it on the shared plain NATS, then on the authenticated, permissioned bus without and with
 * TLS (its own nats-server, a user per gpu-node), and prints the cost of bus security (goal:
 * ≤ 10 % loss); `plain`, `auth` or `secure` runs one. Then, if present, the Docker executor's start overhead against a
 * bare `docker run` (bench/docker-executor.bench.ts). BENCH_MODE `preempt` (part of the default):
 * the pure placement pass with 1,000 preemptible jobs running and 100 waiting (bench/scheduler-preemption.ts).
 */
import { existsSync } from "fs";
import path from "path";
import { budgetLines, jobCost, windowS } from "./lib/job-cost";
import { BusMode, completed, CONCURRENCY, drained, fmt, now, quantile, startCluster, times, verdict } from "./scheduler-cluster";
import { runDeepQueue, runFairness } from "./scheduler-deep";
import { runPreemptionPass } from "./scheduler-preemption";

const ALL_MODES: BusMode[] = ["plain", "auth", "secure"];
const BUS_MODES: BusMode[] = ALL_MODES.includes(process.env.BENCH_BUS as BusMode) ? [process.env.BENCH_BUS as BusMode] : ALL_MODES;
/** BENCH_MODE: `throughput` (the latency and throughput runs below), `preempt`, `deep`, `fair`, or several, comma-separated (default `preempt,throughput`). */
const BENCH_MODES = (process.env.BENCH_MODE || "preempt,throughput").split(",").map((m) => m.trim());
// Two runs in one: half the jobs each by default, so the whole stays about a minute.
const SCALE = BUS_MODES.length === 2 ? 0.5 : 1;
const NODES = Number(process.env.BENCH_NODES || 100);
const LATENCY_JOBS = Number(process.env.BENCH_LATENCY_JOBS || 300 * SCALE);
const THROUGHPUT_JOBS = Number(process.env.BENCH_JOBS || 10_000 * SCALE);
const GOALS = { jobsPerS: 1000, p50Ms: 15, p99Ms: 50 };

type Figures = { p50: number; p99: number; jobsPerS: number };

async function runCluster(mode: BusMode): Promise<Figures> {
  // One account submits the whole run: throughput is measured here, not the per-account queue cap.
  const cluster = await startCluster(mode, NODES, { QUOTA_QUEUED_JOBS: "1000000" });
  const { db } = cluster;
  try {
    const call = await cluster.account("throughput");
    const submit = async (sent: Map<string, number>) => {
      const t0 = now();
      const res = await call("POST", "/api/gpu/jobs", { command: "true" });
      if (res.status !== 201) throw new Error(`POST /api/gpu/jobs: ${res.status} ${JSON.stringify(res.body)}`);
      sent.set(res.body.id, t0);
      return now() - t0;
    };

    // Warm-up: connections, JIT, prepared paths.
    const warm = new Map<string, number>();
    await Promise.all(Array.from({ length: 200 }, () => submit(warm)));
    await completed(db, [...warm.keys()]);

    // 1. Latency on an idle cluster: one job at a time.
    const lat = new Map<string, number>();
    const postMs: number[] = [];
    for (let i = 0; i < LATENCY_JOBS; i++) postMs.push(await submit(lat));
    await completed(db, [...lat.keys()]);
    const latRows = await times(db, [...lat.keys()]);
    const toRunning = latRows.map((r) => r.started - lat.get(r.id)!).sort((a, b) => a - b);
    const median = (f: (r: (typeof latRows)[number]) => number) =>
      quantile(
        latRows.map(f).sort((a, b) => a - b),
        0.5,
      );
    const stages = {
      insert: median((r) => r.created - lat.get(r.id)!),
      place: median((r) => r.assigned - r.created),
      dispatch: median((r) => r.started - r.assigned),
    };
    postMs.sort((a, b) => a - b);

    // 2. Throughput: CONCURRENCY clients submitting THROUGHPUT_JOBS no-op jobs; their cost per job.
    const costBefore = await cluster.meter.snapshot();
    const thr = new Map<string, number>();
    let next = 0;
    const first = now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next++ < THROUGHPUT_JOBS) await submit(thr);
      }),
    );
    const submittedMs = now() - first;
    await drained(db);
    const costAfter = await cluster.meter.snapshot();
    await completed(db, [...thr.keys()]);
    const rows = await times(db, [...thr.keys()]);
    const lastCompleted = Math.max(...rows.map((r) => r.completed));
    const spanS = (lastCompleted - first) / 1000;
    const jobsPerS = THROUGHPUT_JOBS / spanS;
    const lifetime = rows.map((r) => r.completed - r.created).sort((a, b) => a - b);

    const p50 = quantile(toRunning, 0.5);
    const p99 = quantile(toRunning, 0.99);
    console.log(`POST → running on an idle card (${LATENCY_JOBS} jobs, one at a time)`);
    console.log(`  p50 ${fmt(p50)} ms (goal ≤ ${GOALS.p50Ms}: ${verdict(p50 <= GOALS.p50Ms)}, ${fmt(p50 / GOALS.p50Ms, 2)}× the goal)`);
    console.log(`  p99 ${fmt(p99)} ms (goal ≤ ${GOALS.p99Ms}: ${verdict(p99 <= GOALS.p99Ms)}, ${fmt(p99 / GOALS.p99Ms, 2)}× the goal)`);
    console.log(`  HTTP answer to the POST: p50 ${fmt(quantile(postMs, 0.5))} ms, p99 ${fmt(quantile(postMs, 0.99))} ms`);
    console.log(
      `  medians by stage: POST sent → stored ${fmt(stages.insert)} ms, stored → placed ${fmt(stages.place)} ms, placed → running (gpu-node.run and back) ${fmt(stages.dispatch)} ms\n`,
    );
    console.log(`Throughput (${THROUGHPUT_JOBS} no-op jobs, ${CONCURRENCY} concurrent clients)`);
    console.log(
      `  ${fmt(jobsPerS, 0)} jobs/s from first submit to last completed (goal ≥ ${GOALS.jobsPerS}: ${verdict(jobsPerS >= GOALS.jobsPerS)}; against Slurm measured in the same run: npm run bench:slurm)`,
    );
    console.log(
      `  submitting alone: ${fmt(THROUGHPUT_JOBS / (submittedMs / 1000), 0)} jobs/s; created → completed per job: p50 ${fmt(quantile(lifetime, 0.5))} ms, p99 ${fmt(quantile(lifetime, 0.99))} ms`,
    );
    console.log(`  every job completed exactly once: ${rows.length === THROUGHPUT_JOBS ? "yes" : "NO"}`);
    console.log(`${budgetLines(jobCost(costBefore, costAfter, THROUGHPUT_JOBS), THROUGHPUT_JOBS, windowS(costBefore, costAfter)).join("\n")}\n`);
    return { p50, p99, jobsPerS };
  } finally {
    await cluster.stop();
  }
}

async function main() {
  const started = Date.now();
  const results = new Map<BusMode, Figures>();
  if (BENCH_MODES.includes("preempt")) runPreemptionPass();
  if (BENCH_MODES.includes("deep") || BENCH_MODES.includes("fair")) {
    // The deep-queue and fairness modes share one cluster on plain NATS (bench/scheduler-deep.ts).
    const cluster = await startCluster("plain", NODES, { QUOTA_QUEUED_JOBS: "1000000" });
    try {
      if (BENCH_MODES.includes("deep")) await runDeepQueue(cluster);
      if (BENCH_MODES.includes("fair")) await runFairness(cluster);
    } finally {
      await cluster.stop();
    }
  }
  if (BENCH_MODES.includes("throughput")) for (const mode of BUS_MODES) results.set(mode, await runCluster(mode));
  const plain = results.get("plain");
  const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)} %`;
  for (const [mode, name] of [
    ["auth", "authenticated, permissioned, no TLS"],
    ["secure", "authenticated, permissioned, TLS"],
  ] as const) {
    const secured = results.get(mode);
    if (!plain || !secured) continue;
    console.log(`Cost of bus security (${name} / plain NATS)`);
    console.log(`  throughput ${fmt(secured.jobsPerS, 0)} / ${fmt(plain.jobsPerS, 0)} jobs/s = ${pct(secured.jobsPerS, plain.jobsPerS)} (goal ≥ 90 %)`);
    console.log(`  POST → running p50 ${fmt(secured.p50)} / ${fmt(plain.p50)} ms, p99 ${fmt(secured.p99)} / ${fmt(plain.p99)} ms\n`);
  }

  const dockerBench = path.join(__dirname, "docker-executor.bench.ts");
  if (BENCH_MODES.includes("throughput") && existsSync(dockerBench) && process.env.BENCH_SKIP_DOCKER !== "1") {
    console.log("Docker executor start overhead against a bare `docker run` (bench/docker-executor.bench.ts)");
    try {
      const { benchDockerExecutor, printDockerExecutorFigures } = await import(dockerBench);
      printDockerExecutorFigures(await benchDockerExecutor());
    } catch (err) {
      console.log(`  not measured: ${(err as Error).message}`);
    }
  }
  console.log(`\nbench:scheduler done in ${fmt((Date.now() - started) / 1000)} s`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
