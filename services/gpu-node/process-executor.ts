/**
 * The process executor (GPU_EXECUTOR=process), for hosts without Docker: each job runs in a
 * bubblewrap sandbox (sandbox.ts) as an unprivileged user, in its own namespaces, with a minimal
 * environment and CUDA_VISIBLE_DEVICES naming its cards. Only GPU_UNSAFE_UNISOLATED_JOBS=true runs
 * jobs as plain processes of the node's own user (development on a machine without bubblewrap).
 */
import { Socket } from "net";
import { mkdtempSync, promises as fs } from "fs";
import os from "os";
import path from "path";
import type { NodeCard } from "./discovery";
import { jobCards, JobError, JobExecutor, JobLimits, JobOps, JobSpec, limitsOf, RunningJob } from "./job";
import type { OutputCapture } from "./output";
import { keepArtifacts, packFolder } from "./artifacts";
import { Launched, LaunchRequest, sharedLauncher } from "./launcher";
import { outOfMemory } from "./cgroups";
import { JobCgroup } from "./cgroup-host";
import { jobProcess, ProcessIsolation, withLauncherHome } from "./job-process";
import { openPlatformAccess, PlatformAccess, RelayHost } from "./platform-access";
import { openServeSocket, ServeSocket } from "./serve-relay";

// Importable from here as before (tests, bench and scripts name the executor's module).
export * from "./job-process";

/**
 * Runs `/bin/true` in the sandbox exactly as a job would run; null when it works, else why not
 * (bwrap missing, user namespaces disabled, prlimit missing, …).
 */
export async function probeSandbox(isolation: ProcessIsolation & { kind: "sandbox" }, timeoutMs = 10_000): Promise<string | null> {
  const card: NodeCard = { uuid: "probe", index: 0, name: "probe", memoryTotal: 0, memoryUsed: 0, utilization: 0, temperature: 0, simulated: true };
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), "ci-job-probe-"));
  let cgroup: JobCgroup | undefined;
  try {
    if (isolation.cgroups) cgroup = await JobCgroup.create(isolation.cgroups.layout, "probe", isolation.cgroups.limits);
    const request = await jobProcess({ jobId: "probe", card, command: "exit 0" }, isolation, workDir, undefined, cgroup);
    // Through the launcher, as every job (it alone can fork into a job's cgroup).
    const launched = await launch(request, isolation).catch((err: Error) => err);
    if (launched instanceof Error) return `${isolation.bwrap} could not be started: ${launched.message}`;
    let output = "";
    launched.output.on("data", (c: Buffer) => (output += c.toString()));
    const closed = new Promise<void>((resolve) => (launched.output.closed ? resolve() : launched.output.once("close", () => resolve())));
    const timer = setTimeout(() => signal(-launched.pid, "SIGKILL"), timeoutMs);
    const { code, signal: sig } = await launched.exit;
    clearTimeout(timer);
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    launched.output.destroy();
    const detail = output.trim().split("\n").slice(-2).join(" ").slice(0, 300);
    return code === 0 ? null : `${isolation.bwrap} failed (${sig ?? `exit ${code}`})${detail ? `: ${detail}` : ""}`;
  } catch (err) {
    if (isolation.cgroups && !cgroup) return `the probe job's cgroup could not be made: ${(err as Error).message}`;
    throw err;
  } finally {
    await cgroup?.remove();
    await fs.rm(workDir, { recursive: true, force: true });
  }
}

function signalExitCode(signal: NodeJS.Signals | null): number {
  const number = signal ? os.constants.signals[signal] : undefined;
  return number ? 128 + number : 1;
}

/** Signals one process or (negative pid) a process group; one already gone is not an error. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

/** Every process below `root` (by parent pid in /proc), however deep: a sandbox's processes. */
export async function descendantPids(root: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const name of await fs.readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, "utf8").catch(() => "");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (!Number.isInteger(ppid)) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const found: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length) {
    const pid = queue.shift()!;
    found.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/**
 * SIGTERM to the job's own processes. Outside a sandbox that is its process group. In one, the
 * job runs in a new session below bwrap's init: signal everything below init (init itself would
 * take the whole sandbox down at once, with no grace).
 */
async function terminate(pid: number, isolation: ProcessIsolation): Promise<void> {
  if (isolation.kind === "unisolated") return signal(-pid, "SIGTERM");
  const [init] = await descendantPids(pid).then((all) => all.slice(0, 1));
  if (init === undefined) return signal(pid, "SIGTERM");
  for (const pid of await descendantPids(init)) signal(pid, "SIGTERM");
}

/** Starts `request` through the node's launcher (into its cgroup, when it has one: withLauncherHome). */
async function launch(request: LaunchRequest, isolation: ProcessIsolation): Promise<Launched> {
  const launcher = sharedLauncher();
  const layout = isolation.kind === "sandbox" ? isolation.cgroups?.layout : undefined;
  return launcher.launch(request.cgroup ? withLauncherHome(request, layout, await launcher.helperPid()) : request);
}

/**
 * A job's work folder goes: most are empty by now (one rmdir), else everything in it. Not
 * synchronously: the folder was a mount point in the sandbox's namespace, and its rmdir may wait
 * for the kernel to detach that (about 1.4 ms of the event loop per job, measured).
 */
async function removeWorkDir(dir: string): Promise<void> {
  await fs.rmdir(dir).catch(() => fs.rm(dir, { recursive: true, force: true }));
}

/** The owner of a job's relay folder: the job's user, when the node is root (else the node's own user is the job's). */
const relayOwner = (isolation: ProcessIsolation) =>
  isolation.kind === "sandbox" && process.getuid?.() === 0 ? { uid: isolation.uid, gid: isolation.gid } : undefined;

function processOps(spec: JobSpec, isolation: ProcessIsolation, limits: JobLimits, relay?: RelayHost): JobOps {
  let child: { pid: number; stdout: Socket; ended: boolean } | undefined;
  let workDir: string | undefined;
  let exit: Promise<number> | undefined;
  let outputClosed: Promise<void> = Promise.resolve();
  let capture: OutputCapture | undefined;
  let cgroup: JobCgroup | undefined;
  let failure: string | undefined;
  let access: PlatformAccess | undefined;
  let serve: ServeSocket | undefined;

  return {
    async launch(output: OutputCapture) {
      capture = output;
      workDir = mkdtempSync(path.join(os.tmpdir(), "ci-job-"));
      if (isolation.kind === "sandbox" && isolation.cgroups) cgroup = await JobCgroup.create(isolation.cgroups.layout, spec.jobId, isolation.cgroups.limits);
      if (spec.platform) access = await openPlatformAccess(spec.jobId, spec.platform, relay, relayOwner(isolation));
      if (spec.servePort != null) {
        if (!relay) throw new JobError("This GPU node cannot serve a deployment's replica (it has no relay folder)");
        serve = await openServeSocket(relay.dir, spec.jobId, spec.servePort, relayOwner(isolation));
      }
      const request = await jobProcess(spec, isolation, workDir, limits.outMaxBytes, cgroup, access, serve);
      // The resident launcher forks it (in its own process group), not this process. Its start
      // time is when it was asked: the answer may come later than the job's first instructions.
      const askedAt = Date.now();
      const launched = await launch(request, isolation).catch((err: Error) => {
        throw new JobError(`The job's process could not be started: ${err.message}`);
      });
      const job = { pid: launched.pid, stdout: launched.output, ended: false };
      child = job;
      job.stdout.on("data", (chunk: Buffer) => {
        output.append(chunk);
        // A log file behind the job: pause the stream (the job waits) rather than buffer its output.
        if (output.congested) {
          job.stdout.pause();
          output.whenDrained(() => job.stdout.resume());
        }
      });
      outputClosed = job.stdout.closed ? Promise.resolve() : new Promise((resolve) => job.stdout.once("close", () => resolve()));
      exit = launched.exit.then(({ code, signal: sig }) => ((job.ended = true), code ?? signalExitCode(sig)));
      return askedAt;
    },

    async exited() {
      const code = await exit!;
      // Whatever the job left running in the background ends with it, as in a container (a
      // sandbox's namespace ends with its init already).
      signal(-child!.pid, "SIGKILL");
      await cgroup?.killAll();
      if (cgroup && (await cgroup.oomKills()) > 0 && isolation.kind === "sandbox") failure = outOfMemory(isolation.cgroups!.limits);
      return code;
    },

    failure: () => failure,

    async kill(graceS: number) {
      if (!child || child.ended) return;
      const pid = child.pid;
      await terminate(pid, isolation);
      // SIGKILL of the group: bwrap dies, and with it (die-with-parent) the sandbox's init and namespace.
      const timer = setTimeout(() => signal(-pid, "SIGKILL"), graceS * 1000);
      await exit;
      clearTimeout(timer);
    },

    async cleanup() {
      if (child) {
        // A grandchild could hold the pipe open after the group kill only if it left the group.
        const bounded = new Promise<void>((resolve) => setTimeout(resolve, 5000).unref());
        await Promise.race([outputClosed, bounded]);
        child.stdout?.destroy();
      }
      // Every process of the sandbox has ended: what is under /out (the work folder) can no longer change.
      if (workDir && isolation.kind === "sandbox" && child)
        await keepArtifacts(spec.jobId, limits, capture, (dest, maxBytes) => packFolder(workDir!, dest, maxBytes));
      if (workDir) await removeWorkDir(workDir);
      await access?.relay.close();
      await serve?.close();
      await cgroup?.remove();
    },

    detach() {
      child?.stdout?.destroy();
    },
  };
}

export class ProcessExecutor implements JobExecutor {
  readonly kind = "process" as const;
  readonly jobsOutliveNode = false;

  constructor(
    private readonly limits: () => JobLimits,
    readonly isolation: ProcessIsolation,
    /** The node's relay for jobs with platform access (absent: such jobs fail with the reason). */
    private readonly relay?: RelayHost,
  ) {}

  run(spec: JobSpec): RunningJob {
    const limits = limitsOf(spec, this.limits());
    const uuids = jobCards(spec).map((c) => c.uuid);
    return new RunningJob(spec.jobId, spec.card.uuid, processOps(spec, this.isolation, limits, this.relay), limits, spec.attempt, uuids);
  }

  /** Process jobs end with the node (it stops them on the way down): nothing to adopt. */
  async adopt(): Promise<RunningJob[]> {
    return [];
  }
}
