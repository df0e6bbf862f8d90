/**
 * What a process job runs (pure but for reading the host's layout, writing the node's identity
 * files once and the job's /out folder): the launch request of its sandbox (bwrap argv from sandbox.ts, its environment, cwd and
 * user), or of a plain process when jobs run unisolated. process-executor.ts runs it.
 */
import { accessSync, chownSync, constants as fsConstants, promises as fs } from "fs";
import path from "path";
import { gpuDeviceMinor, NodeCard } from "./discovery";
import { jobCards, joinedShell, JobSpec, visibleDevices } from "./job";
import type { LaunchRequest } from "./launcher";
import { gpuDeviceNodes, HostLayout, SANDBOX_HOME, sandboxArgs, SandboxLimits, SYSTEM_PATHS } from "./sandbox";
import { sandboxEtc } from "./sandbox-etc";
import type { CgroupLayout, CgroupLimits } from "./cgroups";
import { launcherHome, type JobCgroup } from "./cgroup-host";
import { JobError } from "./job";
import type { PlatformAccess } from "./platform-access";
import { forwarderArgv, forwarderEnv, hostNode } from "./relay-forwarder";
import type { ServeSocket } from "./serve-relay";

const SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** How the executor isolates jobs: a bubblewrap sandbox, or (explicitly unsafe) not at all. */
export type ProcessIsolation =
  { kind: "sandbox"; bwrap: string; uid: number; gid: number; limits: SandboxLimits; cgroups?: JobCgroups } | { kind: "unisolated" };

/** Each job in a cgroup of its own under `layout`, bounded by `limits` (cgroup-host.ts); absent where the host has none. */
export type JobCgroups = { layout: CgroupLayout; limits: CgroupLimits };

/** Drops NVIDIA_* variables: only the node decides which card a job sees. */
export function withoutNvidiaVariables(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !/^NVIDIA_/i.test(name)));
}

/**
 * The whole environment of a job process; nothing of the node's own environment leaks in. The
 * job's own variables (`jobEnv`) may replace PATH, HOME, TMPDIR and LANG; never its cards'.
 */
export function processJobEnv(cards: NodeCard[], home: string, jobEnv: Record<string, string> = {}): Record<string, string> {
  return withoutNvidiaVariables({
    PATH: SAFE_PATH,
    HOME: home,
    TMPDIR: home,
    LANG: "C.UTF-8",
    ...jobEnv,
    CUDA_VISIBLE_DEVICES: visibleDevices(cards),
  });
}

/** The first executable `bwrap` on `searchPath`, or null. */
export function findBwrap(searchPath = process.env.PATH ?? ""): string | null {
  for (const dir of searchPath.split(":").filter(Boolean)) {
    const candidate = path.join(dir, "bwrap");
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** The host's system paths: read once (file-system calls each launch otherwise). */
let systemLayout: Promise<Omit<HostLayout, "devices">> | undefined;

async function readSystemLayout(): Promise<Omit<HostLayout, "devices">> {
  const layout: Omit<HostLayout, "devices"> = { symlinks: {}, directories: [] };
  for (const dir of SYSTEM_PATHS) {
    const stat = await fs.lstat(dir).catch(() => null);
    if (stat?.isSymbolicLink()) layout.symlinks[dir] = await fs.readlink(dir);
    else if (stat?.isDirectory()) layout.directories.push(dir);
  }
  return layout;
}

/** What of the host's root the sandbox may show, for a job holding `cards`. */
export async function readHostLayout(cards: NodeCard[]): Promise<HostLayout> {
  const layout: HostLayout = { ...(await (systemLayout ??= readSystemLayout())), devices: [] };
  const real = cards.filter((c) => !c.simulated);
  if (real.length) {
    const minors = await Promise.all(real.map((c) => gpuDeviceMinor(c)));
    for (const device of gpuDeviceNodes(minors)) if (await fs.stat(device).catch(() => null)) layout.devices.push(device);
  }
  return layout;
}

/** The node binary the relay's forwarder runs with inside a sandbox: this process's own, which the sandbox shows only under a system path. */
function sandboxNode(): string {
  const node = hostNode();
  if (!SYSTEM_PATHS.some((dir) => node.startsWith(`${dir}/`)))
    throw new JobError(`Platform access and deployments need the node's Node.js binary under /usr in a sandbox (it is ${node})`);
  return node;
}

/** Drops the node's root to the job's uid/gid before bwrap runs. */
function asJobUser(isolation: ProcessIsolation & { kind: "sandbox" }): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { uid: isolation.uid, gid: isolation.gid } : {};
}

/**
 * The program, arguments, environment, cwd and user of one job (moved into `cgroup` first, when
 * given). `workDir`: the job's own folder, made by the caller (mkdtemp): an unisolated job's cwd and
 * HOME, a sandboxed job's /out.
 */
export async function jobProcess(
  spec: JobSpec,
  isolation: ProcessIsolation,
  workDir: string,
  fileMaxBytes?: number,
  cgroup?: JobCgroup,
  access?: PlatformAccess,
  serve?: ServeSocket,
): Promise<LaunchRequest> {
  if (isolation.kind === "unisolated") {
    const shell = [...joinedShell("/bin/sh"), spec.command];
    if (access) throw new JobError("Platform access needs a sandboxed job: this node runs jobs unisolated (GPU_UNSAFE_UNISOLATED_JOBS)");
    if (serve) throw new JobError("A deployment's replica needs a sandboxed job: this node runs jobs unisolated (GPU_UNSAFE_UNISOLATED_JOBS)");
    return { file: shell[0], args: shell.slice(1), cwd: workDir, env: processJobEnv(jobCards(spec), workDir, spec.env) };
  }
  // The launcher joins stderr into stdout (joinStderr below): no outer shell to do it, one exec less per job.
  const shell = ["/bin/sh", "-c", spec.command];
  const etcDir = await sandboxEtc(isolation.uid, isolation.gid);
  // A sandboxed job's work folder is its /out itself (0700, made by mkdtemp): the job's user owns it
  // (bwrap runs as that user and binds it), one chown instead of a folder inside and its mode and owner.
  const outDir = workDir;
  if (process.getuid?.() === 0) chownSync(outDir, isolation.uid, isolation.gid);
  const jobEnv = processJobEnv(jobCards(spec), SANDBOX_HOME, access ? { ...spec.env, ...access.env } : spec.env);
  // The forwarder runs in front of the job when it has routes: platform access (outbound), a replica's port (inbound).
  const routes = [...(access?.routes ?? []), ...(serve ? [serve.route] : [])];
  const env = routes.length ? forwarderEnv(jobEnv) : jobEnv;
  const args = sandboxArgs({
    layout: await readHostLayout(jobCards(spec)),
    uid: isolation.uid,
    gid: isolation.gid,
    limits: isolation.limits,
    etcDir,
    argv: routes.length ? forwarderArgv([sandboxNode()], routes, shell) : shell,
    outDir,
    fileMaxBytes,
    relayDir: access?.relay.dir,
    serveDir: serve?.dir,
  });
  // bwrap passes its own environment on, and it is readable inside (/proc/1/environ): the job's only.
  // The launcher forks bwrap as the job's user straight into the job's cgroup (launcher.ts): no shell
  // to move itself there and no setpriv to drop root, two execs less per job. `home`: the launcher's own
  // cgroups, filled in by the caller that knows the launcher (withLauncherHome).
  const cgroupEntry = cgroup ? { cgroup: { enter: cgroup.entryFiles, home: [] } } : {};
  return { file: isolation.bwrap, args, cwd: "/", env, ...asJobUser(isolation), joinStderr: true, ...cgroupEntry };
}

/** The request with the launcher's own cgroups (the helper at `helperPid` moves back there after forking the job). */
export function withLauncherHome(request: LaunchRequest, layout: CgroupLayout | undefined, helperPid: number): LaunchRequest {
  if (!request.cgroup || !layout) return request;
  return { ...request, cgroup: { ...request.cgroup, home: launcherHome(layout, helperPid) } };
}
