/**
 * bench:node-launch — what launching a sandboxed job costs gpu-node's own process, in one run:
 * - direct: the node forks bwrap itself (child_process.spawn, as before issue 18);
 * - launcher: the resident launcher forks it (services/gpu-node/launcher.ts, what the node does now).
 * Both build the same request (work folder, passwd/group, bwrap argv) and run the same job
 * (`exit 0`) with JOBS in flight; per round they alternate which goes first, ROUNDS times, and print
 * min/median/max of: the node's event-loop delay (mean and max, ms), the node's CPU per launch (ms),
 * the launcher helper's CPU per launch (ms: the work moved, not removed) and launches per second.
 * The node's heap is padded to about a real gpu-node's size (fork copies its page tables).
 */
import { ChildProcess, spawn } from "child_process";
import { promises as fs, readFileSync } from "fs";
import os from "os";
import path from "path";
import { monitorEventLoopDelay } from "perf_hooks";
import { Launcher, LaunchRequest } from "../services/gpu-node/launcher";
import { jobProcess } from "../services/gpu-node/process-executor";
import { simulatedCard, testSandbox } from "../test/support/sandbox";
import { median, spread } from "./lib/spread";

const LAUNCHES = Number(process.env.LAUNCHES ?? 200);
const JOBS = Number(process.env.JOBS ?? 8);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const PAD_MB = Number(process.env.PAD_MB ?? 64);

const isolation = testSandbox();
const card = simulatedCard("GPU-sim-bench-launch");
/** /proc's CPU times are in clock ticks: 100 per second on Linux (USER_HZ). */
const MS_PER_TICK = 10;

type Round = { loopMeanMs: number; loopMaxMs: number; nodeCpuMs: number; helperCpuMs: number; perSecond: number };

/** CPU ms (user + system) of a process so far, from /proc (clock ticks of 10 ms). */
function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK;
}

/** One job from request to exit, the work folder made and removed as the executor does. */
/** Starts a job; resolves once it runs, to its exit code's promise (wrapped: a bare promise would be flattened). */
type Start = (request: LaunchRequest) => Promise<{ exit: Promise<number | null> }>;

async function oneJob(start: Start): Promise<void> {
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), "ci-job-bench-"));
  try {
    const request = await jobProcess({ jobId: "bench", card, command: "exit 0" }, isolation, workDir);
    const code = await (await start(request)).exit;
    if (code !== 0) throw new Error(`job exited ${code}`);
  } finally {
    await fs.rm(workDir, { recursive: true, force: true });
  }
}

const direct: Start = async ({ file, args, ...options }) => {
  const proc: ChildProcess = spawn(file, args, { ...options, detached: true, stdio: ["ignore", "pipe", "ignore"] });
  proc.stdout!.resume();
  await new Promise<void>((resolve, reject) => proc.once("spawn", resolve).once("error", reject));
  return { exit: new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code))) };
};

async function round(start: Start, helperPid: () => number | undefined): Promise<Round> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  const cpu0 = process.cpuUsage();
  const helper0 = helperPid() ? cpuMsOf(helperPid()!) : 0;
  const t0 = performance.now();
  histogram.enable();
  let next = 0;
  await Promise.all(
    Array.from({ length: JOBS }, async () => {
      while (next++ < LAUNCHES) await oneJob(start);
    }),
  );
  histogram.disable();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const helperMs = helperPid() ? cpuMsOf(helperPid()!) - helper0 : 0;
  return {
    loopMeanMs: histogram.mean / 1e6,
    loopMaxMs: histogram.max / 1e6,
    nodeCpuMs: (cpu.user + cpu.system) / 1000 / LAUNCHES,
    helperCpuMs: helperMs / LAUNCHES,
    perSecond: LAUNCHES / seconds,
  };
}

async function main() {
  // A heap the size of a running gpu-node's, touched so its pages are really mapped.
  const pad = Buffer.alloc(PAD_MB * 1024 * 1024, 1);
  const launcher = new Launcher();
  const viaLauncher: Start = async (request) => {
    const launched = await launcher.launch(request);
    launched.output.resume();
    return { exit: launched.exit.then((e) => e.code) };
  };
  await oneJob(direct);
  await oneJob(viaLauncher); // warm-up: the helper starts here, outside the measurement
  const results: Record<"direct" | "launcher", Round[]> = { direct: [], launcher: [] };
  for (let i = 0; i < ROUNDS; i++) {
    const order: Array<"direct" | "launcher"> = i % 2 ? ["launcher", "direct"] : ["direct", "launcher"];
    for (const name of order) results[name].push(await round(name === "direct" ? direct : viaLauncher, () => (name === "launcher" ? launcher.pid : undefined)));
  }
  launcher.close();
  const rss = Math.round(process.memoryUsage().rss / (1 << 20));
  console.log(
    `bench:node-launch — ${LAUNCHES} sandboxed launches per round, ${JOBS} in flight, ${ROUNDS} rounds alternating; node RSS ${rss} MiB (pad ${pad.length >> 20} MiB)`,
  );
  console.log(`figures: min / median / max over rounds`);
  const rows: Array<[string, (r: Round) => number]> = [
    ["event-loop delay, mean (ms)", (r) => r.loopMeanMs],
    ["event-loop delay, max (ms)", (r) => r.loopMaxMs],
    ["node CPU per launch (ms)", (r) => r.nodeCpuMs],
    ["launcher helper CPU per launch (ms)", (r) => r.helperCpuMs],
    ["launches per second", (r) => r.perSecond],
  ];
  for (const [label, pick] of rows)
    console.log(`  ${label.padEnd(38)} direct ${spread(results.direct.map(pick)).padEnd(24)} launcher ${spread(results.launcher.map(pick))}`);
  const ratio = median(results.launcher.map((r) => r.nodeCpuMs)) / median(results.direct.map((r) => r.nodeCpuMs));
  console.log(`node CPU per launch, launcher / direct (medians, same run): ${ratio.toFixed(2)}×`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
