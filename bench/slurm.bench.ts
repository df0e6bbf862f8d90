/**
 * bench:slurm — the platform beside a real Slurm (Debian's slurm-wlm 22.05 with munge) on this
 * one host, in one run: the same jobs (`date +%s%N`, a real process launch on both sides, one
 * GPU each of 8) through `sbatch` and through POST /api/gpu/jobs (bench/slurm/sides.ts).
 * - submit → running on an idle cluster, one job at a time (BENCH_LATENCY_JOBS, default 30): from
 *   just before the submission to the clock the job printed, p50 / p99;
 * - throughput: BENCH_JOBS (default 2,000) jobs from BENCH_CONCURRENCY (default 8) concurrent
 *   submitters, first submit → all seen completed (both polled every 50 ms), submit → running
 *   under that load, and the submissions' own rate in that run (the launches share the machine);
 * - submitting with nothing running: as many jobs from as many submitters into the cluster with its
 *   node drained (Slurm: `scontrol … State=DRAIN`; the platform: the admin API's drain), then
 *   cancelled: what submission costs when no launch competes for the cores.
 * For the platform, the per-job cost budget of the throughput run (bench/lib/job-cost.ts: CPU, SQL,
 * bus messages, rows). Then an array of BENCH_ARRAY (default 10,000) jobs doing nothing, one
 * submission each side (bench/slurm/arrays.ts): submit time and submit → all completed. BENCH_PARTS
 * (`jobs,array`, the default, or one of them) picks the parts. Then the ratios. The platform runs first and is stopped before Slurm
 * starts, so neither loads the other. The Slurm daemons are stopped at the end, also on failure or Ctrl-C.
 * Needs root (the Slurm daemons and apt), bubblewrap, PostgreSQL. BENCH_SLURM=skip measures the
 * platform alone; BENCH_PROFILE_DIR writes a CPU profile of the platform's process there.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { waitFor } from "../test/support/platform";
import { budgetLines, jobCost, windowS } from "./lib/job-cost";
import { ArrayFigures, arrayRatioLines, measureArray } from "./slurm/arrays";
import { GPUS, PlatformSide, Side, SlurmSide } from "./slurm/sides";

const JOBS = Number(process.env.BENCH_JOBS || 2000);
const LATENCY_JOBS = Number(process.env.BENCH_LATENCY_JOBS || 30);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 8);
const WARMUP_JOBS = 16;
const POLL_MS = 50;
const PARTS = (process.env.BENCH_PARTS || "jobs,array").split(",").map((p) => p.trim());

const now = () => performance.timeOrigin + performance.now();
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const fmt = (n: number, digits = 1) => n.toFixed(digits);

type Figures = { idleP50: number; idleP99: number; jobsPerS: number; loadP50: number; loadP99: number; submitPerS: number; heldSubmitPerS: number };

/** Submits `count` jobs from `concurrency` submitters; the submit time of each job by id. */
async function submitAll(side: Side, count: number, concurrency: number): Promise<Map<string, number>> {
  const sent = new Map<string, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next++ < count) {
        const t0 = now();
        sent.set(await side.submit(), t0);
      }
    }),
  );
  return sent;
}

const allCompleted = (side: Side, ids: string[], timeoutMs: number) =>
  waitFor(() => side.completed(ids), { timeoutMs, intervalMs: POLL_MS, message: `${ids.length} ${side.name} jobs completed` });

/** Submit → running (ms, sorted) of the jobs submitted at `sent`. */
async function toRunning(side: Side, sent: Map<string, number>): Promise<number[]> {
  const started = await side.startTimes([...sent.keys()]);
  return [...sent].map(([id, t0]) => started.get(id)! - t0).sort((a, b) => a - b);
}

async function measure(side: Side): Promise<Figures> {
  // Warm-up: connections, caches, the first launches.
  await allCompleted(side, [...(await submitAll(side, WARMUP_JOBS, CONCURRENCY)).keys()], 60_000);

  const idle = new Map<string, number>();
  for (let i = 0; i < LATENCY_JOBS; i++) {
    const one = await submitAll(side, 1, 1);
    await allCompleted(side, [...one.keys()], 30_000);
    for (const [id, t0] of one) idle.set(id, t0);
  }
  const idleMs = await toRunning(side, idle);

  // The platform's cost per job over the throughput run (bench/lib/job-cost-meter.ts).
  const meter = side instanceof PlatformSide ? side.meter : undefined;
  const costBefore = await meter?.snapshot();
  const first = now();
  const sent = await submitAll(side, JOBS, CONCURRENCY);
  const submittedMs = now() - first;
  // Generous: Slurm here runs about one job per card per second.
  await allCompleted(side, [...sent.keys()], Math.max(120_000, JOBS * 1000));
  const spanS = (now() - first) / 1000;
  const costAfter = await meter?.snapshot();
  const loadMs = await toRunning(side, sent);
  // Submission by itself: the same submitters into a cluster that starts nothing (its node drained),
  // so no launch of the jobs submitted shares the machine; those jobs are cancelled, never run.
  await side.hold();
  const heldFrom = now();
  const held = await submitAll(side, JOBS, CONCURRENCY);
  const heldMs = now() - heldFrom;
  await side.release([...held.keys()]);
  const figures = {
    idleP50: quantile(idleMs, 0.5),
    idleP99: quantile(idleMs, 0.99),
    jobsPerS: JOBS / spanS,
    loadP50: quantile(loadMs, 0.5),
    loadP99: quantile(loadMs, 0.99),
    submitPerS: JOBS / (submittedMs / 1000),
    heldSubmitPerS: JOBS / (heldMs / 1000),
  };
  console.log(`${side.name}:`);
  console.log(`  submit → running, idle (${LATENCY_JOBS} jobs one at a time): p50 ${fmt(figures.idleP50)} ms, p99 ${fmt(figures.idleP99)} ms`);
  console.log(`  throughput (${JOBS} jobs, ${CONCURRENCY} submitters): ${fmt(figures.jobsPerS)} jobs/s first submit → last completed (${fmt(spanS)} s)`);
  console.log(
    `  submitting alone: ${fmt(figures.submitPerS, 0)} jobs/s; submit → running under that load: p50 ${fmt(figures.loadP50)} ms, p99 ${fmt(figures.loadP99)} ms`,
  );
  console.log(`  submitting with nothing running (${JOBS} jobs into the drained cluster, then cancelled): ${fmt(figures.heldSubmitPerS, 0)} jobs/s`);
  if (costBefore && costAfter) console.log(budgetLines(jobCost(costBefore, costAfter, JOBS), JOBS, windowS(costBefore, costAfter)).join("\n"));
  console.log("");
  return figures;
}

type Both = { jobs?: Figures; array?: ArrayFigures };

/** The parts asked for (PARTS), on one side. */
async function measureParts(side: Side): Promise<Both> {
  return {
    jobs: PARTS.includes("jobs") ? await measure(side) : undefined,
    array: PARTS.includes("array") ? await measureArray(side) : undefined,
  };
}

function ratioLines(ours: Figures, theirs: Figures): string[] {
  return [
    `  throughput: ${fmt(ours.jobsPerS)} / ${fmt(theirs.jobsPerS)} jobs/s = ${fmt(ours.jobsPerS / theirs.jobsPerS, 2)}× Slurm's`,
    `  submit → running, idle: p50 ${fmt(ours.idleP50)} / ${fmt(theirs.idleP50)} ms = ${fmt(theirs.idleP50 / ours.idleP50, 2)}× lower, p99 ${fmt(ours.idleP99)} / ${fmt(theirs.idleP99)} ms = ${fmt(theirs.idleP99 / ours.idleP99, 2)}× lower`,
    `  submit → running under load: p50 ${fmt(ours.loadP50)} / ${fmt(theirs.loadP50)} ms = ${fmt(theirs.loadP50 / ours.loadP50, 2)}× lower`,
    `  submitting alone (beside the launches): ${fmt(ours.submitPerS, 0)} / ${fmt(theirs.submitPerS, 0)} jobs/s = ${fmt(ours.submitPerS / theirs.submitPerS, 2)}× sbatch's (goal ≥ 5×)`,
    `  submitting with nothing running: ${fmt(ours.heldSubmitPerS, 0)} / ${fmt(theirs.heldSubmitPerS, 0)} jobs/s = ${fmt(ours.heldSubmitPerS / theirs.heldSubmitPerS, 2)}× sbatch's`,
  ];
}

async function main() {
  const started = Date.now();
  const work = mkdtempSync(path.join(os.tmpdir(), "bench-slurm-"));
  let platform: PlatformSide | undefined;
  let slurm: SlurmSide | undefined;
  // Ctrl-C or a kill: neither the platform process nor the daemons may outlive the bench.
  const interrupted = async () => {
    await platform?.stop().catch(() => undefined);
    await slurm?.stop().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
    process.exit(130);
  };
  process.once("SIGINT", () => void interrupted());
  process.once("SIGTERM", () => void interrupted());
  try {
    console.log(`bench:slurm — one host, ${GPUS} GPUs (fake device files for Slurm, simulated cards for the platform), ${os.cpus().length} CPU cores\n`);
    platform = await PlatformSide.start(path.join(work, "platform"));
    const ours = await measureParts(platform);
    await platform.stop();
    platform = undefined;
    // BENCH_SLURM=skip: the platform alone (its figures and cost budget, no ratios), e.g. for profiles.
    if (process.env.BENCH_SLURM === "skip") return;
    slurm = new SlurmSide(path.join(work, "slurm"));
    await slurm.start();
    const theirs = await measureParts(slurm);
    await slurm.stop();
    slurm = undefined;

    console.log("platform against Slurm");
    if (ours.jobs && theirs.jobs) console.log(ratioLines(ours.jobs, theirs.jobs).join("\n"));
    if (ours.array && theirs.array) console.log(arrayRatioLines(ours.array, theirs.array).join("\n"));
  } finally {
    await platform?.stop().catch((err) => console.error(`stopping the platform: ${err}`));
    await slurm?.stop().catch((err) => console.error(`stopping Slurm: ${err}`));
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`\nbench:slurm done in ${fmt((Date.now() - started) / 1000)} s`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
