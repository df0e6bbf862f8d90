/**
 * Per-job control groups of the process executor, the pure part: where the node's own cgroups are
 * (from /proc/self/mountinfo and /proc/self/cgroup), which files of a job's cgroup get which limit,
 * and how an OOM kill reads back. cgroup v2 is used where its memory controller is available;
 * else cgroup v1's memory hierarchy; pids and cpu wherever the host has them too. The I/O is
 * cgroup-host.ts.
 */

/** A job's bounds: memory (tmpfs pages it writes count: /tmp and /dev/shm), processes, CPUs. */
export type CgroupLimits = { memoryBytes: number; pids: number; cpus?: number };

/**
 * Where job cgroups are made: v2 one parent folder (with the pids and cpu controllers or not); v1
 * one per hierarchy, memory always. `kill`: v2's cgroup.kill exists (kernel >= 5.14).
 */
export type CgroupLayout =
  { version: 2; parent: string; pids: boolean; cpu: boolean; kill: boolean } | { version: 1; memory: string; pids?: string; cpu?: string };
/** The CFS period cpu.max / cpu.cfs_period_us use: 100 ms, as Docker's --cpus. */
export const CPU_PERIOD_US = 100_000;

type Mount = { root: string; mountPoint: string; fsType: string; superOptions: string[] };

/** The cgroup mounts of /proc/self/mountinfo: `id parent maj:min root mountpoint opts [tags] - fstype source superopts`. */
export function cgroupMounts(mountinfo: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!right) continue;
    const fields = left.split(" ");
    const [fsType, , superOptions = ""] = right.split(" ");
    if (fsType === "cgroup" || fsType === "cgroup2")
      mounts.push({ root: unescapeMount(fields[3]), mountPoint: unescapeMount(fields[4]), fsType, superOptions: superOptions.split(",") });
  }
  return mounts;
}

/** mountinfo escapes spaces and friends as octal (`\040`). */
const unescapeMount = (s: string): string => s.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

/** This process's cgroup per hierarchy from /proc/self/cgroup: `"0"` keys the v2 path, each v1 controller its own. */
export function ownCgroups(procSelfCgroup: string): Record<string, string> {
  const own: Record<string, string> = {};
  for (const line of procSelfCgroup.split("\n")) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!match) continue;
    if (match[1] === "0" && match[2] === "") own["0"] = match[3];
    else for (const controller of match[2].split(",")) if (controller) own[controller] = match[3];
  }
  return own;
}

/** The folder of cgroup `cgroupPath` in `mount` (a mount of a sub-tree shows the paths below its root). */
export function cgroupFolder(mount: Pick<Mount, "root" | "mountPoint">, cgroupPath: string): string {
  const root = mount.root === "/" ? "" : mount.root;
  const rel = root && (cgroupPath === root || cgroupPath.startsWith(`${root}/`)) ? cgroupPath.slice(root.length) : cgroupPath;
  return joinPath(mount.mountPoint, rel);
}

const joinPath = (...parts: string[]): string => `/${parts.join("/").split("/").filter(Boolean).join("/")}`;

/** The v2 folder of this process, if a cgroup2 hierarchy is mounted. */
export function ownV2Folder(mounts: Mount[], own: Record<string, string>): string | undefined {
  const mount = mounts.find((m) => m.fsType === "cgroup2");
  return mount && own["0"] !== undefined ? cgroupFolder(mount, own["0"]) : undefined;
}

/** The v1 folder of this process in the hierarchy that holds `controller`, if mounted. */
export function ownV1Folder(mounts: Mount[], own: Record<string, string>, controller: string): string | undefined {
  const mount = mounts.find((m) => m.fsType === "cgroup" && m.superOptions.includes(controller));
  return mount && own[controller] !== undefined ? cgroupFolder(mount, own[controller]) : undefined;
}

/** cpu.max for a share of `cpus` CPUs: `<quota> <period>` in microseconds; `max` when unbounded. */
export function cpuMax(cpus: number | undefined): string {
  return cpus && cpus > 0 ? `${Math.max(1000, Math.round(cpus * CPU_PERIOD_US))} ${CPU_PERIOD_US}` : `max ${CPU_PERIOD_US}`;
}

/** A job's cgroup name: a node may run the same job id again (another attempt), so a sequence number too. */
export function jobCgroupName(jobId: string, seq: number): string {
  return `job-${jobId.replace(/[^A-Za-z0-9_.-]/g, "_")}-${seq}`;
}

/** The folders of one job's cgroup: v2 one, v1 one per hierarchy. */
export function jobFolders(layout: CgroupLayout, name: string): string[] {
  if (layout.version === 2) return [joinPath(layout.parent, name)];
  return [layout.memory, layout.pids, layout.cpu].filter((parent): parent is string => parent !== undefined).map((parent) => joinPath(parent, name));
}

/** One write of a limit; `optional`: skipped when the kernel has no such file (swap accounting off, older kernels). */
export type LimitWrite = { file: string; value: string; optional?: boolean };

/** Which files of a job's cgroup folders get which value, in order (v1's memsw after the memory limit it may not undercut). */
export function limitWrites(layout: CgroupLayout, name: string, limits: CgroupLimits): LimitWrite[] {
  const memory = String(limits.memoryBytes);
  const pids = String(limits.pids);
  if (layout.version === 2) {
    const dir = joinPath(layout.parent, name);
    return [
      { file: `${dir}/memory.max`, value: memory },
      // No swap: a job's memory (tmpfs included) is never pushed out to disk to escape its limit.
      { file: `${dir}/memory.swap.max`, value: "0", optional: true },
      // An OOM kills the whole job, not a random part of it.
      { file: `${dir}/memory.oom.group`, value: "1", optional: true },
      ...(layout.pids ? [{ file: `${dir}/pids.max`, value: pids }] : []),
      ...(layout.cpu ? [{ file: `${dir}/cpu.max`, value: cpuMax(limits.cpus) }] : []),
    ];
  }
  const [quota, period] = cpuMax(limits.cpus).split(" ");
  const memoryDir = joinPath(layout.memory, name);
  return [
    { file: `${memoryDir}/memory.limit_in_bytes`, value: memory },
    { file: `${memoryDir}/memory.memsw.limit_in_bytes`, value: memory, optional: true },
    ...(layout.pids ? [{ file: `${joinPath(layout.pids, name)}/pids.max`, value: pids }] : []),
    ...(layout.cpu
      ? [
          { file: `${joinPath(layout.cpu, name)}/cpu.cfs_period_us`, value: period },
          { file: `${joinPath(layout.cpu, name)}/cpu.cfs_quota_us`, value: quota === "max" ? "-1" : quota },
        ]
      : []),
  ];
}

/** Where the OOM kills of a job's cgroup are counted: v2 memory.events, v1 memory.oom_control. */
export function oomEventsFile(layout: CgroupLayout, name: string): string {
  const [memoryDir] = jobFolders(layout, name);
  return `${memoryDir}/${layout.version === 2 ? "memory.events" : "memory.oom_control"}`;
}

/** The `oom_kill N` count of memory.events / memory.oom_control (0 when the kernel does not say). */
export function oomKills(events: string): number {
  const match = /^oom_kill (\d+)$/m.exec(events);
  return match ? Number(match[1]) : 0;
}

/** The errorMessage of a job the kernel killed for memory (either executor). */
export function outOfMemory(limits: Pick<CgroupLimits, "memoryBytes">): string {
  const mib = Math.round(limits.memoryBytes / (1024 * 1024));
  return `The job ran out of memory: its processes and the files it wrote to /tmp and /dev/shm exceeded its ${mib} MiB, and the kernel killed it`;
}

/** What a job's cgroup enforces here, or (null layout) why nothing is: the node says it once at start. */
export function describeEnforcement(layout: CgroupLayout | null, why?: string): string {
  if (!layout)
    return (
      `Job cgroups: none (${why ?? "no writable cgroup"}). A sandboxed job's memory is bounded only per process (RLIMIT_DATA) ` +
      "plus the sizes of its /tmp and /dev/shm, its processes by RLIMIT_NPROC, and its CPU time not at all"
    );
  const where = layout.version === 2 ? layout.parent : `${layout.memory} (v1)`;
  const pids = layout.version === 2 ? layout.pids : layout.pids !== undefined;
  const cpu = layout.version === 2 ? layout.cpu : layout.cpu !== undefined;
  const bounded = ["total memory (its /tmp and /dev/shm included, no swap)", ...(pids ? ["process count"] : []), ...(cpu ? ["CPU share"] : [])];
  const unbounded = [...(pids ? [] : ["process count (RLIMIT_NPROC only: no pids controller)"]), ...(cpu ? [] : ["CPU time (no cpu controller)"])];
  return `Job cgroups under ${where} bound each job's ${bounded.join(", ")}${unbounded.length ? `; not its ${unbounded.join(" nor its ")}` : ""}`;
}
