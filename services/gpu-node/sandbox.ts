/**
 * The bubblewrap sandbox of a process job, as a pure argv builder: new user, PID, mount,
 * network, IPC and UTS namespaces; a read-only view of the system's programs and libraries only;
 * a minimal /etc (one folder the node prepared); a fresh /proc (the host's processes are invisible), a minimal /dev plus the job's
 * own GPU device nodes; a size-bounded tmpfs as HOME and cwd; nothing of the platform (its
 * checkout, its environment, job logs, the Docker socket, /run) and no route to the host's
 * loopback services. Process limits are applied inside with prlimit. What exists on the host
 * (HostLayout) is read by the caller (readHostLayout in job-process.ts).
 */

import { DEFAULT_SHM_MB } from "./settings";
import { RELAY_MOUNT } from "./relay-forwarder";
import { SERVE_MOUNT } from "./serve-relay";

/** What the builder needs to know about the host's root: which top-level paths exist, and how. */
export type HostLayout = {
  /** Top-level system paths (`/bin`, `/lib64`, …) that are symlinks on the host (merged /usr), with their target. */
  symlinks: Record<string, string>;
  /** Top-level system directories that are real directories on the host (bound read-only). */
  directories: string[];
  /** GPU device nodes that exist on the host, for this job's cards (see gpuDeviceNodes). */
  devices: string[];
};

export type SandboxLimits = {
  /** RLIMIT_NPROC inside the job's own user namespace. */
  processes: number;
  /** RLIMIT_DATA: private writable memory of each process (heap, anonymous mappings). */
  memoryBytes: number;
  /** Size of the job's writable /tmp (tmpfs). */
  tmpBytes: number;
  /** Size of the job's /dev/shm (tmpfs; GPU_JOB_SHM_MB); the node's default when unset. */
  shmBytes?: number;
};

/** Where a job leaves files to keep (artifacts.ts). */
export const SANDBOX_OUT = "/out";

export type SandboxOptions = {
  layout: HostLayout;
  uid: number;
  gid: number;
  limits: SandboxLimits;
  /** The sandbox's /etc, bound read-only: the node's folder of the safe entries (SAFE_ETC) and its minimal passwd and group (sandbox-etc.ts). */
  etcDir: string;
  /** The program and arguments run inside (after prlimit). */
  argv: string[];
  /** The job's own host folder, bound writable as /out (packed by the node when the job ends). */
  outDir?: string;
  /** RLIMIT_FSIZE: the largest file the job may write (GPU_JOB_OUT_MAX_MB). */
  fileMaxBytes?: number;
  /** The job's relay folder (platform access, relay.ts), bound read-only at RELAY_MOUNT. */
  relayDir?: string;
  /** A deployment replica's serve folder (serve-relay.ts), bound writable at SERVE_MOUNT: its forwarder makes the socket there. */
  serveDir?: string;
};

/** Where programs and libraries live; nothing else of the host's root is shown. */
export const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/**
 * /etc entries a program commonly needs (dynamic linker, TLS roots, time zone, alternatives
 * symlinks) and that hold no secrets. Not passwd/group: the node writes minimal ones. Copied into
 * the node's sandbox /etc (sandbox-etc.ts), as far as every user may read them.
 */
export const SAFE_ETC = [
  "alternatives",
  "ca-certificates",
  "ca-certificates.conf",
  "debian_version",
  "host.conf",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "localtime",
  "mime.types",
  "nsswitch.conf",
  "os-release",
  "protocols",
  "services",
  "ssl",
  "timezone",
];

export const PRLIMIT = "/usr/bin/prlimit";
export const SANDBOX_HOSTNAME = "ci-job";
export const SANDBOX_HOME = "/tmp";

/**
 * The device nodes of the given GPU minor numbers plus the driver's shared nodes, in the order
 * they are bound; the caller keeps only those that exist on the host.
 */
export function gpuDeviceNodes(minors: number[]): string[] {
  return [...minors.map((m) => `/dev/nvidia${m}`), "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"];
}

/** The whole bwrap argv (without the bwrap binary itself). */
export function sandboxArgs(opts: SandboxOptions): string[] {
  // --unshare-user explicitly (--unshare-all only tries): --disable-userns needs it, and a job
  // that can make nested user namespaces reaches kernel code an unprivileged user should not.
  const args = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL"];
  args.push("--uid", String(opts.uid), "--gid", String(opts.gid), "--hostname", SANDBOX_HOSTNAME);
  for (const dir of SYSTEM_PATHS) {
    const target = opts.layout.symlinks[dir];
    if (target !== undefined) args.push("--symlink", target, dir);
    else if (opts.layout.directories.includes(dir)) args.push("--ro-bind", dir, dir);
  }
  args.push("--proc", "/proc", "--dev", "/dev");
  // bwrap's /dev/shm is a plain folder of the sandbox's root tmpfs: a bounded tmpfs of its own instead.
  args.push("--perms", "1777", "--size", String(opts.limits.shmBytes ?? DEFAULT_SHM_MB * 1024 * 1024), "--tmpfs", "/dev/shm");
  for (const device of opts.layout.devices) args.push("--dev-bind", device, device);
  args.push("--perms", "1777", "--size", String(opts.limits.tmpBytes), "--tmpfs", SANDBOX_HOME);
  args.push("--ro-bind", opts.etcDir, "/etc");
  if (opts.outDir) args.push("--bind", opts.outDir, SANDBOX_OUT);
  if (opts.relayDir) args.push("--ro-bind", opts.relayDir, RELAY_MOUNT);
  if (opts.serveDir) args.push("--bind", opts.serveDir, SERVE_MOUNT);
  // The job's environment is bwrap's own (the spawn's env), never arguments: a command line is
  // readable by every user of the host (/proc/<pid>/cmdline), and env values often hold tokens.
  args.push("--chdir", SANDBOX_HOME);
  const fsize = opts.fileMaxBytes ? [`--fsize=${opts.fileMaxBytes}`] : [];
  args.push(PRLIMIT, `--nproc=${opts.limits.processes}`, `--data=${opts.limits.memoryBytes}`, ...fsize, "--core=0", "--", ...opts.argv);
  return args;
}

/** /etc/passwd and /etc/group of the sandbox: root and the job's own user only. */
export function identityFiles(uid: number, gid: number): { passwd: string; group: string } {
  const user = uid === 65534 ? "nobody" : "job";
  const group = gid === 65534 ? "nogroup" : "job";
  return {
    passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\n${user}:x:${uid}:${gid}:${user}:${SANDBOX_HOME}:/bin/sh\n`,
    group: `root:x:0:\n${group}:x:${gid}:\n`,
  };
}
