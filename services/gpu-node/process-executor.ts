/**
 * The process executor (GPU_EXECUTOR=process), for bare hosts and development: `sh -c <command>`
 * in its own process group, in a fresh temporary folder, with a minimal environment and
 * CUDA_VISIBLE_DEVICES naming the assigned card. It isolates nothing beyond that: production
 * uses it only when an operator asks for it explicitly.
 */
import { ChildProcess, spawn } from "child_process";
import { promises as fs } from "fs";
import os from "os";
import path from "path";
import type { NodeCard } from "./discovery";
import { JobError, JobExecutor, JobLimits, JobOps, JobSpec, RunningJob } from "./job";
import type { OutputCapture } from "./output";

/** `sh -c JOIN_STDERR ci-job <command>`: stderr into stdout, then exec the job's own `sh -c`. */
const JOIN_STDERR = 'exec 2>&1; exec /bin/sh -c "$1"';

const SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Drops NVIDIA_* variables: only the node decides which card a job sees. */
export function withoutNvidiaVariables(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !/^NVIDIA_/i.test(name)));
}

/** The whole environment of a job process; nothing of the node's own environment leaks in. */
export function processJobEnv(card: NodeCard, home: string, extra: Record<string, string> = {}): Record<string, string> {
  return withoutNvidiaVariables({
    ...extra,
    PATH: SAFE_PATH,
    HOME: home,
    TMPDIR: home,
    LANG: "C.UTF-8",
    CUDA_VISIBLE_DEVICES: card.uuid,
  });
}

function signalExitCode(signal: NodeJS.Signals | null): number {
  const number = signal ? os.constants.signals[signal] : undefined;
  return number ? 128 + number : 1;
}

/** Signals the job's whole process group; a group already gone is not an error. */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

function processOps(spec: JobSpec): JobOps {
  let child: ChildProcess | undefined;
  let home: string | undefined;
  let exit: Promise<number> | undefined;
  let outputClosed: Promise<void> = Promise.resolve();

  return {
    async launch(output: OutputCapture) {
      home = await fs.mkdtemp(path.join(os.tmpdir(), "ci-job-"));
      // The outer shell joins stderr into stdout (one pipe keeps their order), then runs the job.
      const proc = spawn("/bin/sh", ["-c", JOIN_STDERR, "ci-job", spec.command], {
        detached: true,
        cwd: home,
        env: processJobEnv(spec.card, home),
        stdio: ["ignore", "pipe", "ignore"],
      });
      child = proc;
      proc.stdout!.on("data", (chunk: Buffer) => output.append(chunk));
      outputClosed = new Promise((resolve) => proc.stdout!.once("close", () => resolve()));
      exit = new Promise((resolve) => proc.once("exit", (code, signal) => resolve(code ?? signalExitCode(signal))));
      await new Promise<void>((resolve, reject) => {
        proc.once("spawn", () => resolve());
        proc.once("error", (err) => reject(new JobError(`The job's shell could not be started: ${err.message}`)));
      });
    },

    async exited() {
      const code = await exit!;
      // Whatever the job left running in the background ends with it, as in a container.
      signalGroup(child!.pid!, "SIGKILL");
      return code;
    },

    async kill(graceS: number) {
      if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
      const pid = child.pid;
      signalGroup(pid, "SIGTERM");
      const timer = setTimeout(() => signalGroup(pid, "SIGKILL"), graceS * 1000);
      await exit;
      clearTimeout(timer);
    },

    async cleanup() {
      if (child?.pid) {
        // A grandchild could hold the pipe open after the group kill only if it left the group.
        const bounded = new Promise<void>((resolve) => setTimeout(resolve, 5000).unref());
        await Promise.race([outputClosed, bounded]);
        child.stdout?.destroy();
      }
      if (home) await fs.rm(home, { recursive: true, force: true });
    },

    detach() {
      child?.stdout?.destroy();
    },
  };
}

export class ProcessExecutor implements JobExecutor {
  readonly kind = "process" as const;
  readonly jobsOutliveNode = false;

  constructor(private readonly limits: () => JobLimits) {}

  run(spec: JobSpec): RunningJob {
    return new RunningJob(spec.jobId, spec.card.uuid, processOps(spec), this.limits());
  }

  /** Process jobs end with the node (it stops them on the way down): nothing to adopt. */
  async adopt(): Promise<RunningJob[]> {
    return [];
  }
}
