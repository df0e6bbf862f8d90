/**
 * Attack replays: a sandboxed process job (no Docker) tries to take the host's memory and
 * processes (issue 8: three 800 MB processes plus /dev/shm and /tmp held 3.8 GB under a 1 GiB
 * job limit; a fork bomb drove the load to 201). Real bwrap, real cgroups, bounded allocations
 * (at most ~2.4 GB, and only if the limit fails). On a host that offers no writable cgroups at all
 * the replays are skipped with a note; one that offers them but where they do not hold fails.
 */
import { spawn, spawnSync } from "child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { detectCgroups } from "../../services/gpu-node/cgroup-host";
import { CgroupLayout, cgroupMounts, jobFolders, ownCgroups, ownV1Folder, ownV2Folder } from "../../services/gpu-node/cgroups";
import type { JobLimits } from "../../services/gpu-node/job";
import { readLogPage } from "../../services/gpu-node/log-store";
import { ProcessExecutor, ProcessIsolation } from "../../services/gpu-node/process-executor";
import { sharedLauncher } from "../../services/gpu-node/launcher";
import { startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";
import { evaluateReadiness } from "../../lib/health";
import { hostPidsRunning, simulatedCard, testSandbox } from "../support/sandbox";

const MiB = 1024 * 1024;
const JOB_MEMORY = 1024 * MiB;
const JOB_PIDS = 64;
const card = simulatedCard("GPU-sim-cgroups-0");

/** Which controllers this host shows the test (as root) for its own cgroup, v2 or v1: the node must then use them. */
function hostOffers(): { memory: boolean; pids: boolean; cpu: boolean } {
  if (process.getuid?.() !== 0) return { memory: false, pids: false, cpu: false };
  const mounts = cgroupMounts(readFileSync("/proc/self/mountinfo", "utf8"));
  const own = ownCgroups(readFileSync("/proc/self/cgroup", "utf8"));
  const v2 = ownV2Folder(mounts, own);
  const controllers = v2 && existsSync(`${v2}/cgroup.controllers`) ? readFileSync(`${v2}/cgroup.controllers`, "utf8").split(/\s+/) : [];
  if (controllers.includes("memory")) return { memory: true, pids: controllers.includes("pids"), cpu: controllers.includes("cpu") };
  const v1 = (controller: string) => Boolean(ownV1Folder(mounts, own, controller));
  return { memory: v1("memory"), pids: v1("pids"), cpu: v1("cpu") };
}

/** Peak of `sample()` (polled) until `done` settles. */
async function peakWhile<T>(done: Promise<T>, sample: () => number): Promise<{ result: T; peak: number }> {
  let peak = 0;
  let finished = false;
  void done.finally(() => (finished = true));
  while (!finished) {
    peak = Math.max(peak, sample());
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return { result: await done, peak };
}

/** Resident memory of the host processes whose command line contains `marker`. */
function rssOf(marker: string): number {
  let total = 0;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) continue;
      total += Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** tmpfs pages on the host (/proc/meminfo Shmem). */
const hostShmem = (): number => Number(/^Shmem:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"))![1]) * 1024;

const offered = hostOffers();
if (!offered.memory) console.warn("sandbox.cgroups: this host offers no cgroup v2/v1 memory controller (or the test is not root): replays skipped");
if (offered.memory && !offered.pids) console.warn("sandbox.cgroups: this host offers no pids controller: the fork-bomb replay is skipped");

(offered.memory ? describe : describe.skip)("sandbox cgroups - a hostile process job against the host's memory and processes", () => {
  let logDir: string;
  let limits: JobLimits;
  let isolation: ProcessIsolation & { kind: "sandbox" };
  let executor: ProcessExecutor;
  const run = (command: string) => executor.run({ jobId: uniqueName("cg"), card, command });

  beforeAll(async () => {
    const detected = await detectCgroups();
    // The host offers cgroups: the node must find and use them (a silent fallback would hide the attack).
    if (!detected.layout) throw new Error(`cgroups are offered here but the node found none: ${detected.why}`);
    const layout = detected.layout;
    const uses = (controller: "pids" | "cpu") => (layout.version === 2 ? layout[controller] : layout[controller] !== undefined);
    for (const controller of ["pids", "cpu"] as const)
      if (offered[controller] !== uses(controller)) throw new Error(`the host offers a ${controller} controller the node does not use`);
    isolation = testSandbox({
      limits: { processes: 256, memoryBytes: JOB_MEMORY, tmpBytes: JOB_MEMORY, shmBytes: JOB_MEMORY },
      cgroups: { layout: detected.layout, limits: { memoryBytes: JOB_MEMORY, pids: JOB_PIDS, cpus: 1 } },
    });
    logDir = mkdtempSync(path.join(os.tmpdir(), "sandbox-cgroups-"));
    limits = { timeoutS: 60, graceS: 1, logDir };
    executor = new ProcessExecutor(() => limits, isolation);
  });
  afterAll(() => {
    rmSync(logDir, { recursive: true, force: true });
    // This process's parent cgroup(s), empty now (a node's own outlive it until the next node's start removes them).
    for (const dir of isolation ? jobFolders(isolation.cgroups!.layout, "") : []) rmdirSync(dir);
  });

  /** The job's cgroup folders that exist now (by its id). */
  const jobCgroupsOf = (jobId: string): string[] => {
    const parent = jobFolders(isolation.cgroups!.layout, "")[0];
    return readdirSync(parent).filter((name) => name.startsWith(`job-${jobId}-`));
  };

  test("sandbox cgroups - three 800 MB processes under a 1 GiB job limit: the job fails out of memory, the host never holds much more than 1 GiB", async () => {
    const marker = uniqueName("hog");
    const hog = `python3 -c 'import time; b = bytearray(800 << 20); print("held", flush=True); time.sleep(4)' ${marker}`;
    const job = run(`for i in 1 2 3; do ${hog} & done; wait; echo all-held`);
    const { result: outcome, peak } = await peakWhile(job.outcome, () => rssOf(marker));
    expect(peak).toBeGreaterThan(100 * MiB); // the hogs did run
    expect(peak).toBeLessThan(JOB_MEMORY + 128 * MiB); // RSS counts shared libraries once per process
    expect(outcome).toMatchObject({ type: "failed", errorMessage: expect.stringMatching(/ran out of memory.*1024 MiB/) });
    expect(outcome!.output.match(/^held$/gm)?.length ?? 0).toBeLessThanOrEqual(1); // never two at once
  }, 60_000);

  test("sandbox cgroups - 900 MB each to /dev/shm and /tmp (both under their size) count against the job: it fails out of memory", async () => {
    const before = hostShmem();
    const job = run("head -c 900M /dev/zero > /dev/shm/fill && head -c 900M /dev/zero > /tmp/fill && echo wrote-both");
    const { result: outcome, peak } = await peakWhile(job.outcome, () => hostShmem() - before);
    expect(outcome).toMatchObject({ type: "failed", errorMessage: expect.stringMatching(/ran out of memory/) });
    expect(outcome!.output).not.toContain("wrote-both");
    expect(peak).toBeLessThan(JOB_MEMORY + 128 * MiB);
  }, 60_000);

  (offered.pids ? test : test.skip)(
    "sandbox cgroups - a fork bomb (up to 2000 sleepers) stops at the job's pids limit, another job still runs, and the cgroup is gone after",
    async () => {
      const seconds = String(300_000 + Math.floor(Math.random() * 600_000));
      const bomb = run(`( i=0; while [ $i -lt 2000 ]; do sleep ${seconds} & i=$((i + 1)); done ); echo stopped-forking; exec sleep ${seconds}`);
      expect(await bomb.started).toBe(true);
      await waitFor(async () => (await readLogPage(logDir, bomb.jobId))?.text.includes("stopped-forking"), {
        timeoutMs: 30_000,
        message: "the bomb to stop forking",
      });
      const sleepers = hostPidsRunning(["sleep", seconds]).length;
      expect(sleepers).toBeGreaterThan(JOB_PIDS / 2); // it did fork
      expect(sleepers).toBeLessThanOrEqual(JOB_PIDS);
      expect(jobCgroupsOf(bomb.jobId)).toHaveLength(1);
      // Born in it: every sleeper's cgroup (as the host sees it) is the job's.
      const cgroupOf = (pid: number) => readFileSync(`/proc/${pid}/cgroup`, "utf8");
      expect(hostPidsRunning(["sleep", seconds]).filter((pid) => !cgroupOf(pid).includes(`/job-${bomb.jobId}-`))).toEqual([]);
      // The node and the next job are unaffected.
      expect(await run("echo alive").outcome).toMatchObject({ type: "finished", exitCode: 0, output: "alive\n" });
      await bomb.stop("cancel");
      expect(await bomb.outcome).toMatchObject({ type: "cancelled" });
      expect(hostPidsRunning(["sleep", seconds])).toEqual([]);
      expect(jobCgroupsOf(bomb.jobId)).toEqual([]);
    },
    60_000,
  );

  (offered.cpu ? test : test.skip)(
    "sandbox cgroups - a busy job gets its CPU share (0.05 CPU here), not the host's cores",
    async () => {
      const share = new ProcessExecutor(() => limits, {
        ...isolation,
        cgroups: { ...isolation.cgroups!, limits: { memoryBytes: JOB_MEMORY, pids: JOB_PIDS, cpus: 0.05 } },
      });
      const spin = "import os, time\nend = time.time() + 2\nwhile time.time() < end: pass\nt = os.times()\nprint(round(t.user + t.system, 2))";
      const outcome = await share.run({ jobId: uniqueName("cg"), card, command: `python3 -c '${spin}'` }).outcome;
      expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
      expect(Number(outcome!.output)).toBeLessThan(2 * 0.05 + 0.15);
    },
    30_000,
  );

  test("sandbox cgroups - a sandbox that outlived a dead node (bwrap's --die-with-parent raced its death) is killed when the next node starts", async () => {
    const deadPid = spawnSync("true").pid!;
    const pidNs = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))![1];
    const stale = jobFolders(isolation.cgroups!.layout, "").map((parent) => path.join(path.dirname(parent), `ci-gpu-node-${pidNs}-${deadPid}`));
    const seconds = String(300_000 + Math.floor(Math.random() * 600_000));
    const orphan = spawn("sleep", [seconds], { stdio: "ignore" });
    try {
      for (const dir of stale) {
        mkdirSync(path.join(dir, "job-orphan-1"), { recursive: true });
        writeFileSync(path.join(dir, "job-orphan-1", "cgroup.procs"), String(orphan.pid));
      }
      expect(hostPidsRunning(["sleep", seconds])).toEqual([orphan.pid]);
      expect((await detectCgroups()).layout).not.toBeNull();
      await waitFor(() => orphan.exitCode !== null || orphan.signalCode !== null, { message: "the orphan to be killed" });
      expect(orphan.signalCode).toBe("SIGKILL");
      expect(stale.filter((dir) => existsSync(dir))).toEqual([]);
    } finally {
      orphan.kill("SIGKILL");
    }
  });

  test("sandbox cgroups - a job in its cgroup runs as the same user with the same environment as one without", async () => {
    const command = "id -u; id -G; env | sort";
    const plain = await new ProcessExecutor(() => limits, testSandbox()).run({ jobId: uniqueName("cg"), card, command }).outcome;
    const inCgroup = await run(command).outcome;
    expect(inCgroup).toMatchObject({ type: "finished", exitCode: 0 });
    expect(inCgroup!.output).toMatch(/^65534\n65534\n/);
    expect(inCgroup!.output).toBe(plain!.output);
  });

  test("sandbox cgroups - the launcher forks the job into its cgroup and is back in its own at once", async () => {
    const helper = await sharedLauncher().helperPid();
    const own = readFileSync(`/proc/${helper}/cgroup`, "utf8");
    const seconds = String(300_000 + Math.floor(Math.random() * 600_000));
    const job = run(`exec sleep ${seconds}`);
    expect(await job.started).toBe(true);
    const [sleeper] = await waitFor(async () => (hostPidsRunning(["sleep", seconds]).length ? hostPidsRunning(["sleep", seconds]) : false));
    expect(readFileSync(`/proc/${sleeper}/cgroup`, "utf8")).toContain(`/job-${job.jobId}-`);
    // In every hierarchy the node uses (v1: memory, pids, cpu each have their line), not in one only.
    const jobLines = readFileSync(`/proc/${sleeper}/cgroup`, "utf8")
      .split("\n")
      .filter((line) => line.includes(`/job-${job.jobId}-`));
    expect(jobLines.length).toBe(jobFolders(isolation.cgroups!.layout, "").length);
    expect(readFileSync(`/proc/${helper}/cgroup`, "utf8")).toBe(own);
    // Every thread of the launcher is back (on cgroup v1 it moves only the thread that forks, launcher.ts).
    for (const thread of readdirSync(`/proc/${helper}/task`)) expect(readFileSync(`/proc/${helper}/task/${thread}/cgroup`, "utf8")).toBe(own);
    await job.stop("cancel");
    expect(await job.outcome).toMatchObject({ type: "cancelled" });
    expect(readFileSync(`/proc/${helper}/cgroup`, "utf8")).toBe(own); // the end of the job killed nothing of the launcher
  });
});

describe("sandbox cgroups - what a node does with the host's cgroups", () => {
  let platform: TestPlatform | undefined;
  let layout: CgroupLayout | undefined;
  afterEach(async () => {
    await platform?.stop();
    platform = undefined;
    for (const dir of layout ? jobFolders(layout, "") : []) rmdirSync(dir); // the node's parent cgroup(s), empty
  });

  test("sandbox cgroups - GPU_REQUIRE_CGROUPS=true: a node uses the host's cgroups for every job, or (none here) refuses jobs and is not ready", async () => {
    const env = { GPU_EXECUTOR: "process", GPU_SIMULATE: "Cgroup Test GPU:1024", GPU_REQUIRE_CGROUPS: "true", GPU_JOB_MEMORY_MB: "512" };
    platform = await startTestPlatform({ services: ["gpu-node"], env });
    const readiness = await evaluateReadiness(platform.broker);
    const { node } = platform.broker.getLocalService("gpu-node") as unknown as { node: { executor?: { isolation?: ProcessIsolation } } };
    if (offered.memory) {
      expect(readiness.checks["gpu-node.job-isolation"]).toBeUndefined();
      const isolation = node.executor!.isolation as ProcessIsolation & { kind: "sandbox" };
      layout = isolation.cgroups?.layout;
      expect(isolation.cgroups?.limits).toMatchObject({ memoryBytes: 512 * MiB, pids: 1024 });
    } else {
      expect(readiness.ready).toBe(false);
      expect(readiness.checks["gpu-node.job-isolation"]?.error).toMatch(/GPU_REQUIRE_CGROUPS=true and this host gives jobs no cgroups/);
    }
  });
});
