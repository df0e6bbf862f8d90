/**
 * What one sandboxed job costs the process executor alone (issue 34), without the scheduler or the
 * database: JOBS jobs (`date +%s%N`, as bench:slurm's) through ProcessExecutor with 8 in flight,
 * in the host's cgroups when the node would use them (as root), after 16 warm-up jobs. Prints per
 * job: the node process's CPU (process.cpuUsage: every thread), the resident launcher's own CPU, and
 * the CPU of the jobs' processes it reaped (bwrap, prlimit, the shell, the command), plus jobs/s.
 * Takes the checkout to measure as its argument, so an earlier commit's executor can be measured
 * with this file: `npx tsx bench/process-executor-cost.ts /path/to/checkout [JOBS]` (default: this
 * checkout, 200 jobs). Run checkouts alternately on a shared machine; CPU per job swings less than jobs/s.
 */
import { mkdtempSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";

const root = path.resolve(process.argv[2] ?? path.join(__dirname, ".."));
const JOBS = Number(process.argv[3] ?? 200);
const IN_FLIGHT = 8;
const WARMUP = 16;
const MS_PER_TICK = 10; // USER_HZ

/** CPU ms of a process itself and of the children it reaped, from /proc. */
function cpuOf(pid: number): { self: number; reaped: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { self: (Number(f[11]) + Number(f[12])) * MS_PER_TICK, reaped: (Number(f[13]) + Number(f[14])) * MS_PER_TICK };
}

async function main() {
  const { ProcessExecutor } = await import(path.join(root, "services/gpu-node/process-executor"));
  const { detectCgroups } = await import(path.join(root, "services/gpu-node/cgroup-host"));
  const { sharedLauncher } = await import(path.join(root, "services/gpu-node/launcher"));
  const { testSandbox, simulatedCard } = await import(path.join(root, "test/support/sandbox"));
  const detected = await detectCgroups();
  const cgroups = detected.layout ? { cgroups: { layout: detected.layout, limits: { memoryBytes: 1 << 30, pids: 1024, cpus: 1 } } } : {};
  const logDir = mkdtempSync(path.join(os.tmpdir(), "executor-cost-"));
  const limits = { timeoutS: 60, graceS: 1, logDir, outMaxBytes: 1 << 30 };
  const executor = new ProcessExecutor(() => limits, testSandbox(cgroups));
  const runOne = async (i: number) => {
    const job = executor.run({ jobId: `cost-${process.pid}-${i}`, card: simulatedCard(`GPU-cost-${i % IN_FLIGHT}`), command: "date +%s%N" });
    const outcome = await job.outcome;
    if (outcome?.type !== "finished") throw new Error(`job ${i}: ${JSON.stringify(outcome)}`);
  };
  try {
    for (let i = 0; i < WARMUP; i++) await runOne(-1 - i);
    const helper = sharedLauncher().pid as number;
    const node0 = process.cpuUsage();
    const helper0 = cpuOf(helper);
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < JOBS) await runOne(next++);
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const node = process.cpuUsage(node0);
    const helper1 = cpuOf(helper);
    const per = (ms: number) => (ms / JOBS).toFixed(2);
    console.log(
      `${root} (${detected.layout ? "with" : "without"} cgroups), ${JOBS} jobs: node ${per((node.user + node.system) / 1000)} ms/job, ` +
        `launcher ${per(helper1.self - helper0.self)} ms/job, jobs' processes ${per(helper1.reaped - helper0.reaped)} ms/job; ` +
        `${(JOBS / seconds).toFixed(1)} jobs/s; load average ${os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(" ")}`,
    );
  } finally {
    sharedLauncher().close();
    rmSync(logDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
