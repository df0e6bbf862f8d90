/**
 * The array part of bench:slurm: one array of BENCH_ARRAY (default 10,000) jobs that do nothing
 * (`true`), through `sbatch --array` and through one POST /api/gpu/jobs with `arrayCount`:
 * - submit: from just before the submission until it was accepted (every job of the array exists);
 * - completion: from just before the submission until every job of it is seen completed (Slurm's
 *   job completion log or the array's counters in the platform database, polled every 250 ms).
 */
import type { Side } from "./sides";

export const ARRAY_JOBS = Number(process.env.BENCH_ARRAY || 10_000);
const POLL_MS = 250;

export type ArrayFigures = { submitMs: number; completeS: number; jobsPerS: number };

const now = () => performance.timeOrigin + performance.now();
const fmt = (n: number, digits = 1) => n.toFixed(digits);

/** Polls `done` until it reaches `count`; a job ended otherwise fails at once (no waiting out the deadline). */
async function untilCompleted(done: () => Promise<number>, count: number, timeoutMs: number, name: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let n = await done(); n < count; n = await done()) {
    if (Date.now() > deadline) throw new Error(`${name}: ${n} of ${count} array jobs completed after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

export async function measureArray(side: Side, count = ARRAY_JOBS): Promise<ArrayFigures> {
  const t0 = now();
  const done = await side.submitArray(count);
  const submitMs = now() - t0;
  console.log(`${side.name}, an array of ${count} jobs (\`true\`): submitted in ${fmt(submitMs)} ms`);
  // Generous: Slurm here runs about one job per card per second.
  await untilCompleted(done, count, Math.max(120_000, count * 1000), side.name);
  const completeS = (now() - t0) / 1000;
  const figures = { submitMs, completeS, jobsPerS: count / completeS };
  console.log(`  submit → all completed ${fmt(completeS)} s = ${fmt(figures.jobsPerS)} jobs/s\n`);
  return figures;
}

/** The ratios of the array run, platform against Slurm. */
export function arrayRatioLines(ours: ArrayFigures, theirs: ArrayFigures, count = ARRAY_JOBS): string[] {
  return [
    `  array of ${count}, submit: ${fmt(ours.submitMs)} / ${fmt(theirs.submitMs)} ms = ${fmt(theirs.submitMs / ours.submitMs, 2)}× faster (goal ≥ 1×)`,
    `  array of ${count}, completion: ${fmt(ours.jobsPerS)} / ${fmt(theirs.jobsPerS)} jobs/s = ${fmt(ours.jobsPerS / theirs.jobsPerS, 2)}× Slurm's throughput (goal ≥ 10×)`,
  ];
}
