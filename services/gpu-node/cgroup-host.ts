/**
 * Per-job control groups on this host (the pure part: cgroups.ts). At start the node finds a
 * writable cgroup v2 (or v1) with the memory and pids controllers and makes a parent cgroup of its
 * own; each sandboxed job then gets a child, `job-<id>-<n>`, with its limits, and the job launcher
 * forks the sandbox straight into it (launcher.ts: it moves itself in, forks, and moves back to
 * launcherHome). On the job's end every process left in it is killed and the cgroup removed.
 */
import { mkdirSync, promises as fs, readFileSync, readlinkSync, rmdirSync, writeFileSync } from "fs";
import path from "path";
import {
  CgroupLayout,
  CgroupLimits,
  cgroupMounts,
  jobCgroupName,
  jobFolders,
  limitWrites,
  oomEventsFile,
  oomKills,
  ownCgroups,
  ownV1Folder,
  ownV2Folder,
} from "./cgroups";

export type CgroupDetection = { layout: CgroupLayout } | { layout: null; why: string };

const errorCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException).code;
const exists = (file: string): Promise<boolean> =>
  fs.access(file).then(
    () => true,
    () => false,
  );
/** A cgroup file's text (synchronously: see JobCgroup.create), or `fallback` when it cannot be read. */
const readOr = (file: string, fallback: string): string => {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return fallback;
  }
};
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** This process's PID namespace (its inode): a pid names a process only within it. */
const pidNamespace = (): string => /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "0";

/** The node's own parent cgroup name: several nodes (and test workers, and containers) may share a host. */
const nodeCgroupName = (): string => `ci-gpu-node-${pidNamespace()}-${process.pid}`;

/**
 * v2: enables the controllers for children of `base`. A non-root cgroup with processes may not
 * (the "no internal processes" rule): this process first moves into a leaf `base/node` of its own.
 */
async function enableV2(base: string, wanted: string[]): Promise<void> {
  const enable = () => fs.writeFile(path.join(base, "cgroup.subtree_control"), wanted.map((c) => `+${c}`).join(" "));
  try {
    await enable();
  } catch (err) {
    if (errorCode(err) !== "EBUSY") throw err;
    const leaf = path.join(base, "node");
    await fs.mkdir(leaf).catch((e) => (errorCode(e) === "EEXIST" ? undefined : Promise.reject(e)));
    await fs.writeFile(path.join(leaf, "cgroup.procs"), String(process.pid));
    // What else runs in the node's own cgroup (a wrapper, a shell that started it) moves along, as container runtimes do.
    for (const pid of (await fs.readFile(path.join(base, "cgroup.procs"), "utf8")).split("\n").filter(Boolean))
      await fs.writeFile(path.join(leaf, "cgroup.procs"), pid).catch(() => undefined);
    await enable().catch((e) => {
      throw errorCode(e) === "EBUSY" ? new Error(`other processes share this node's cgroup ${base}: run the node in a cgroup of its own`) : e;
    });
  }
}

async function detectV2(base: string): Promise<CgroupLayout> {
  const available = (await fs.readFile(path.join(base, "cgroup.controllers"), "utf8")).trim().split(/\s+/);
  if (!available.includes("memory"))
    throw new Error(`cgroup v2 at ${base} offers [${available.join(" ")}], not memory (bound to cgroup v1, or not delegated?)`);
  const wanted = ["memory", ...["pids", "cpu"].filter((c) => available.includes(c))];
  await enableV2(base, wanted);
  await removeStale(base);
  const parent = path.join(base, nodeCgroupName());
  await fs.mkdir(parent, { recursive: true });
  await fs.writeFile(path.join(parent, "cgroup.subtree_control"), wanted.map((c) => `+${c}`).join(" "));
  return { version: 2, parent, pids: wanted.includes("pids"), cpu: wanted.includes("cpu"), kill: await exists(path.join(parent, "cgroup.kill")) };
}

async function detectV1(own: ReturnType<typeof ownCgroups>, mounts: ReturnType<typeof cgroupMounts>): Promise<CgroupLayout> {
  const folder = (controller: string) => ownV1Folder(mounts, own, controller);
  const [memory, pids, cpu] = ["memory", "pids", "cpu"].map(folder);
  if (!memory) throw new Error("no cgroup v1 memory hierarchy is mounted");
  for (const base of [memory, pids, cpu]) if (base) await removeStale(base);
  const name = nodeCgroupName();
  const layout: CgroupLayout = { version: 1, memory: path.join(memory, name), pids: pids && path.join(pids, name), cpu: cpu && path.join(cpu, name) };
  for (const dir of jobFolders(layout, "")) await fs.mkdir(dir, { recursive: true });
  return layout;
}

/**
 * Where this node can bound its jobs, trying it out with a probe cgroup; never throws (a host
 * without writable cgroups runs jobs without them, and the node says so).
 */
export async function detectCgroups(procRoot = "/proc/self"): Promise<CgroupDetection> {
  const reasons: string[] = [];
  try {
    const mounts = cgroupMounts(await fs.readFile(`${procRoot}/mountinfo`, "utf8"));
    const own = ownCgroups(await fs.readFile(`${procRoot}/cgroup`, "utf8"));
    const v2 = ownV2Folder(mounts, own);
    for (const attempt of [v2 ? () => detectV2(v2) : null, () => detectV1(own, mounts)]) {
      if (!attempt) continue;
      try {
        const layout = await attempt();
        const probe = await JobCgroup.create(layout, "probe", { memoryBytes: 64 << 20, pids: 8 });
        await probe.remove();
        return { layout };
      } catch (err) {
        reasons.push((err as Error).message);
      }
    }
  } catch (err) {
    reasons.push((err as Error).message);
  }
  return { layout: null, why: reasons.join("; ") || "no cgroup file system is mounted" };
}

/**
 * The file of cgroup `dir` the launcher writes to, to move there before forking a job (and back):
 * v1's `tasks`, which moves only the thread that forks (launcher.ts), and which the kernel moves
 * without its global lock of whole-process moves (the first taking of that lock after a pause waits
 * for an RCU grace period: 3 to 10 ms per launch on an idle node); v2 has no such file for a
 * domain cgroup: its `cgroup.procs`.
 */
const entryFile = (layout: CgroupLayout, dir: string) => path.join(dir, layout.version === 2 ? "cgroup.procs" : "tasks");

/** The launcher's cgroups by its pid: it leaves for them after each fork into a job's, so they stay the same. */
const launcherHomes = new Map<string, string[]>();

/**
 * The entry files (entryFile) of the cgroups process `pid` (the job launcher) is in, one per hierarchy
 * of `layout` in the order of a job's (jobFolders): where it goes back after forking a job into its cgroup.
 */
export function launcherHome(layout: CgroupLayout, pid: number): string[] {
  const key = `${pid}:${jobFolders(layout, "").join(",")}`;
  let home = launcherHomes.get(key);
  if (!home) {
    const mounts = cgroupMounts(readFileSync("/proc/self/mountinfo", "utf8"));
    const own = ownCgroups(readFileSync(`/proc/${pid}/cgroup`, "utf8"));
    const controllers = layout.version === 2 ? [] : ["memory", ...(layout.pids ? ["pids"] : []), ...(layout.cpu ? ["cpu"] : [])];
    const folders = layout.version === 2 ? [ownV2Folder(mounts, own)] : controllers.map((c) => ownV1Folder(mounts, own, c));
    if (folders.some((f) => f === undefined)) throw new Error(`the job launcher's own cgroups are not all visible (${JSON.stringify(own)})`);
    home = folders.map((folder) => entryFile(layout, folder!));
    launcherHomes.set(key, home);
  }
  return home;
}

let nextSeq = 0;

/** One job's cgroup: made with its limits before the job starts, removed after it ends. */
export class JobCgroup {
  /** A killAll found it empty: only a process inside could put another there, and none is left. */
  private emptied = false;

  private constructor(
    private readonly layout: CgroupLayout,
    readonly name: string,
  ) {}

  /**
   * Made with its limits. The folders and files of the cgroup file system are the kernel's own (no
   * disk behind them): written synchronously, each costs a system call rather than a thread-pool
   * round trip and a promise (about 20 of them per job).
   */
  static async create(layout: CgroupLayout, jobId: string, limits: CgroupLimits): Promise<JobCgroup> {
    const cgroup = new JobCgroup(layout, jobCgroupName(jobId, nextSeq++));
    try {
      for (const dir of jobFolders(layout, cgroup.name)) mkdirSync(dir);
      for (const write of limitWrites(layout, cgroup.name, limits)) {
        try {
          writeFileSync(write.file, write.value);
        } catch (err) {
          if (!(write.optional && errorCode(err) === "ENOENT")) throw new Error(`${write.file}: ${(err as Error).message}`, { cause: err });
        }
      }
    } catch (err) {
      await cgroup.remove();
      throw err;
    }
    return cgroup;
  }

  /** The files the launcher enters to fork the job's first process there (one per hierarchy: entryFile). */
  get entryFiles(): string[] {
    return jobFolders(this.layout, this.name).map((dir) => entryFile(this.layout, dir));
  }

  /** How many processes of the job the kernel killed for memory. */
  async oomKills(): Promise<number> {
    return oomKills(readOr(oomEventsFile(this.layout, this.name), ""));
  }

  /** Every process still in the cgroup is killed (a job's strays; a fork bomb's children). */
  async killAll(): Promise<void> {
    if (this.emptied) return;
    // v1: the memory hierarchy (always there) lists every process of the job as well.
    const [first] = jobFolders(this.layout, this.name);
    if (this.layout.version === 2 && this.layout.kill)
      try {
        writeFileSync(path.join(first, "cgroup.kill"), "1");
      } catch {
        // gone already, or the kernel has none after all: killListed below
      }
    this.emptied = await killListed(first);
  }

  /** Kills what is left (nothing, after a killAll that emptied it: no process can enter it again) and removes the cgroup. */
  async remove(): Promise<void> {
    await this.killAll();
    for (const dir of jobFolders(this.layout, this.name)) await removeFolder(dir);
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errorCode(err) !== "ESRCH";
  }
};

/**
 * Kills every process listed in `dir`'s cgroup.procs until none is (pids.max bounds how many can
 * appear); true once it is empty. Processes killed a moment ago are usually gone within a
 * millisecond or two: the waits between reads start at 1 ms and double up to 10 ms.
 */
async function killListed(dir: string): Promise<boolean> {
  for (let round = 0; round < 200; round++) {
    const pids = readOr(path.join(dir, "cgroup.procs"), "").split("\n").filter(Boolean).map(Number);
    if (!pids.length) return true;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await pause(Math.min(2 ** round, 10));
  }
  return false;
}

/** Removes an emptied cgroup (it may take the kernel a moment to let go of the dead). */
async function removeFolder(dir: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return rmdirSync(dir);
    } catch (err) {
      if (errorCode(err) === "ENOENT") return;
      if (errorCode(err) !== "EBUSY" || attempt >= 100) throw err;
      await pause(20);
    }
  }
}

/**
 * Cgroups of an earlier node on this host that is gone: what still runs in them (a sandbox that
 * missed bwrap's --die-with-parent, racing the node's death) is killed and they are removed.
 */
async function removeStale(base: string): Promise<void> {
  for (const entry of await fs.readdir(base).catch(() => [] as string[])) {
    // Only a node of this PID namespace can be known gone: another container's pids are not ours to judge.
    const owner = /^ci-gpu-node-(\d+)-(\d+)$/.exec(entry);
    if (!owner || owner[1] !== pidNamespace() || alive(Number(owner[2]))) continue;
    const dir = path.join(base, entry);
    for (const job of (await fs.readdir(dir).catch(() => [] as string[])).filter((name) => name.startsWith("job-"))) {
      await killListed(path.join(dir, job));
      await removeFolder(path.join(dir, job)).catch(() => undefined);
    }
    await fs.rmdir(dir).catch(() => undefined);
  }
}
