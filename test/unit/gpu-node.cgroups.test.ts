/** Pure parts of the per-job cgroups: where the node's cgroups are, which limit goes where, how an OOM reads back. */
import {
  CgroupLayout,
  cgroupFolder,
  cgroupMounts,
  cpuMax,
  describeEnforcement,
  jobCgroupName,
  jobFolders,
  limitWrites,
  oomEventsFile,
  oomKills,
  outOfMemory,
  ownCgroups,
  ownV1Folder,
  ownV2Folder,
} from "../../services/gpu-node/cgroups";

/** A hybrid host (v1 controllers, an empty v2 at unified/), as a Docker-in-VM host shows it. */
const HYBRID_MOUNTINFO = [
  "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
  "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
  "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids",
  "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
].join("\n");
const HYBRID_CGROUP = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/588830\n1:cpu,cpuacct:/\n0::/\n";
/** A unified host where a container sees its own sub-tree mounted at /sys/fs/cgroup. */
const V2_MOUNTINFO = "1020 1010 0:27 /docker/abc /sys/fs/cgroup ro,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate";
const V2_CGROUP = "0::/docker/abc/gpu node\n";

const v2: Extract<CgroupLayout, { version: 2 }> = { version: 2, parent: "/sys/fs/cgroup/svc/ci-gpu-node-7", pids: true, cpu: true, kill: true };
const v1: Extract<CgroupLayout, { version: 1 }> = {
  version: 1,
  memory: "/sys/fs/cgroup/memory/ci-gpu-node-7",
  pids: "/sys/fs/cgroup/pids/ci-gpu-node-7",
  cpu: "/sys/fs/cgroup/cpu/ci-gpu-node-7",
};
const limits = { memoryBytes: 1 << 30, pids: 512, cpus: 1.5 };

describe("gpu-node cgroups - finding the node's own cgroups", () => {
  test("gpu-node cgroups - a hybrid host: each v1 controller's folder, the v2 one at unified/", () => {
    const mounts = cgroupMounts(HYBRID_MOUNTINFO);
    const own = ownCgroups(HYBRID_CGROUP);
    expect(mounts.map((m) => m.fsType)).toEqual(["cgroup", "cgroup", "cgroup", "cgroup2"]);
    expect(ownV1Folder(mounts, own, "memory")).toBe("/sys/fs/cgroup/memory/process_api/588830");
    expect(ownV1Folder(mounts, own, "pids")).toBe("/sys/fs/cgroup/pids");
    expect(ownV1Folder(mounts, own, "cpu")).toBe("/sys/fs/cgroup/cpu,cpuacct");
    expect(ownV1Folder(mounts, own, "blkio")).toBeUndefined();
    expect(ownV2Folder(mounts, own)).toBe("/sys/fs/cgroup/unified");
  });

  test("gpu-node cgroups - a container's v2 sub-tree: the path below the mount's root, escaped spaces read back", () => {
    const mounts = cgroupMounts(V2_MOUNTINFO);
    expect(ownV2Folder(mounts, ownCgroups(V2_CGROUP))).toBe("/sys/fs/cgroup/gpu node");
    expect(cgroupMounts("1 2 0:1 / /a\\040b rw - cgroup2 cgroup2 rw")[0].mountPoint).toBe("/a b");
    expect(cgroupFolder({ root: "/", mountPoint: "/sys/fs/cgroup" }, "/system.slice/gpu-node.service")).toBe("/sys/fs/cgroup/system.slice/gpu-node.service");
    expect(ownV2Folder(cgroupMounts(HYBRID_MOUNTINFO.split("\n").slice(0, 4).join("\n")), ownCgroups(HYBRID_CGROUP))).toBeUndefined();
  });
});

describe("gpu-node cgroups - a job's limits", () => {
  test("gpu-node cgroups - v2: memory (no swap, OOM kills the whole job), pids and the CPU share in one folder", () => {
    const name = jobCgroupName("job-1", 3);
    expect(name).toBe("job-job-1-3");
    const dir = `${v2.parent}/${name}`;
    expect(jobFolders(v2, name)).toEqual([dir]);
    expect(limitWrites(v2, name, limits)).toEqual([
      { file: `${dir}/memory.max`, value: "1073741824" },
      { file: `${dir}/memory.swap.max`, value: "0", optional: true },
      { file: `${dir}/memory.oom.group`, value: "1", optional: true },
      { file: `${dir}/pids.max`, value: "512" },
      { file: `${dir}/cpu.max`, value: "150000 100000" },
    ]);
    expect(limitWrites({ ...v2, cpu: false }, name, limits).map((w) => w.file)).not.toContain(`${dir}/cpu.max`);
    // A delegation with the memory controller only (no pids): memory is still bounded.
    expect(limitWrites({ ...v2, pids: false, cpu: false }, name, limits).map((w) => w.file)).toEqual([
      `${dir}/memory.max`,
      `${dir}/memory.swap.max`,
      `${dir}/memory.oom.group`,
    ]);
    expect(oomEventsFile(v2, name)).toBe(`${dir}/memory.events`);
  });

  test("gpu-node cgroups - v1: one folder per hierarchy, memsw after the memory limit, CFS quota", () => {
    const name = jobCgroupName("j", 0);
    expect(jobFolders(v1, name)).toEqual([`${v1.memory}/${name}`, `${v1.pids}/${name}`, `${v1.cpu}/${name}`]);
    expect(limitWrites(v1, name, limits)).toEqual([
      { file: `${v1.memory}/${name}/memory.limit_in_bytes`, value: "1073741824" },
      { file: `${v1.memory}/${name}/memory.memsw.limit_in_bytes`, value: "1073741824", optional: true },
      { file: `${v1.pids}/${name}/pids.max`, value: "512" },
      { file: `${v1.cpu}/${name}/cpu.cfs_period_us`, value: "100000" },
      { file: `${v1.cpu}/${name}/cpu.cfs_quota_us`, value: "150000" },
    ]);
    expect(limitWrites({ ...v1, cpu: undefined }, name, limits)).toHaveLength(3);
    expect(jobFolders({ ...v1, pids: undefined }, name)).toEqual([`${v1.memory}/${name}`, `${v1.cpu}/${name}`]);
    expect(limitWrites({ ...v1, pids: undefined }, name, limits).map((w) => w.file)).not.toContain(`${v1.pids}/${name}/pids.max`);
    expect(limitWrites(v1, name, { ...limits, cpus: undefined }).at(-1)).toEqual({ file: `${v1.cpu}/${name}/cpu.cfs_quota_us`, value: "-1" });
    expect(oomEventsFile(v1, name)).toBe(`${v1.memory}/${name}/memory.oom_control`);
  });

  test("gpu-node cgroups - cpu.max of a share, never below 1 ms a period; unbounded without one", () => {
    expect(cpuMax(0.25)).toBe("25000 100000");
    expect(cpuMax(0.001)).toBe("1000 100000");
    expect(cpuMax(undefined)).toBe("max 100000");
  });

  test("gpu-node cgroups - a job id with odd characters still names one folder", () => {
    expect(jobCgroupName("a/../b", 1)).toBe("job-a_.._b-1");
  });
});

describe("gpu-node cgroups - entering, OOM, what the node says", () => {
  test("gpu-node cgroups - oom_kill counts of memory.events (v2) and memory.oom_control (v1)", () => {
    expect(oomKills("low 0\nhigh 0\nmax 12\noom 1\noom_kill 2\noom_group_kill 1\n")).toBe(2);
    expect(oomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")).toBe(0);
    expect(oomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")).toBe(1);
    expect(oomKills("")).toBe(0);
    expect(outOfMemory(limits)).toMatch(/ran out of memory.*\/tmp and \/dev\/shm.*1024 MiB/);
  });

  test("gpu-node cgroups - the node says what is enforced, and what is not without cgroups", () => {
    expect(describeEnforcement(v2)).toMatch(/under .*ci-gpu-node-7 bound each job's total memory.*, process count, CPU share$/);
    expect(describeEnforcement({ ...v1, cpu: undefined })).toMatch(/\(v1\) bound .*memory.*process count; not its CPU time/);
    expect(describeEnforcement({ ...v2, pids: false, cpu: false })).toMatch(/memory.*; not its process count \(RLIMIT_NPROC only.*nor its CPU time/);
    expect(describeEnforcement(null, "cgroup v2 offers [] (bound to cgroup v1?)")).toMatch(/none \(cgroup v2 offers.*RLIMIT_DATA.*CPU time not at all/);
  });
});
