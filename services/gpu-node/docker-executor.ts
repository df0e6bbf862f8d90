/**
 * The Docker executor (default): each job runs as untrusted code in its own container. The card
 * is handed over by UUID through a device request (never privileged, never all GPUs); the
 * container runs as nobody with every capability dropped, no new privileges, a read-only root,
 * pids/memory/CPU limits, no host mounts and no network unless the operator allows one.
 * Containers carry labels so a restarted node finds the jobs it left running.
 */
import type Docker from "dockerode";
import type { Readable } from "stream";
import { checkImage } from "./registry-policy";
import { JOB_ID_PATTERN, jobCards, joinedShell, JobError, JobExecutor, JobLimits, JobOps, JobSpec, limitsOf, RunningJob, visibleDevices } from "./job";
import { attachOptions, captureStream, recoverGap } from "./docker-output";
import { DEFAULT_SHM_MB } from "./settings";
import { outOfMemory } from "./cgroups";
import { emptyOutTar, keepArtifacts, storeArchive } from "./artifacts";
import type { OutputCapture } from "./output";

export const LABEL_JOB = "ci-platform.job-id";
export const LABEL_NODE = "ci-platform.node";
export const LABEL_GPU = "ci-platform.gpu-uuid";
/** All the job's cards, comma-separated (LABEL_GPU is the first): a restarted node keeps them busy. */
export const LABEL_GPUS = "ci-platform.gpu-uuids";
export const LABEL_NAMESPACE = "ci-platform.namespace";
/** The job's time limit in seconds: a restarted node that adopts the container keeps it. */
export const LABEL_TIMEOUT = "ci-platform.timeout-s";
export const LABEL_ATTEMPT = "ci-platform.attempt";
/** On the short-lived helper that prepares a job's /out volume (never started). */
export const LABEL_OUT_OF = "ci-platform.out-of";

/** Writable scratch space of a job (counts against its memory limit). */
const TMPFS_MB = 1024;
/** Where a job leaves files to keep (artifacts.ts). */
export const OUT_PATH = "/out";

/**
 * The Docker volume holding a job's /out. A volume, not a tmpfs: a container's tmpfs is gone the
 * moment it exits, and /out is archived after the exit.
 */
const OUT_VOLUME_PREFIX = "ci-platform-out-";
export const outVolumeName = (jobId: string): string => `${OUT_VOLUME_PREFIX}${jobId}`;

export type ContainerLimits = {
  memoryMb: number;
  cpus: number;
  pids: number;
  network: string;
  /** /dev/shm of each job in MiB (GPU_JOB_SHM_MB); counts against its memory limit. */
  shmMb?: number;
  /** Largest file a job may write (GPU_JOB_OUT_MAX_MB, RLIMIT_FSIZE); none when unset. */
  fileMaxBytes?: number;
};

export type ContainerContext = {
  nodeId: string;
  namespace: string;
  defaultImage: string;
  limits: ContainerLimits;
  /** GPU_ALLOWED_REGISTRIES: an image from any other registry is neither created nor pulled. */
  allowedRegistries: string[];
};

/** The create request of a job container (pure: tested field by field). */
export function containerSpec(spec: JobSpec, ctx: ContainerContext): Docker.ContainerCreateOptions {
  const vars: Record<string, string> = { HOME: "/tmp", TMPDIR: "/tmp", ...spec.env };
  const cards = jobCards(spec);
  const real = cards.filter((c) => !c.simulated);
  // Pin the cards for images whose own ENV says NVIDIA_VISIBLE_DEVICES=all (nvidia/cuda does).
  if (real.length) vars.NVIDIA_VISIBLE_DEVICES = visibleDevices(real);
  const env = Object.entries(vars).map(([name, value]) => `${name}=${value}`);
  const memoryBytes = ctx.limits.memoryMb * 1024 * 1024;
  return {
    Image: imageOf(spec, ctx.defaultImage),
    // sh -c runs the command whatever the image's own entrypoint would do with it (the image's sh, on its PATH).
    Entrypoint: joinedShell("sh"),
    Cmd: [spec.command],
    User: "65534:65534",
    WorkingDir: "/tmp",
    Env: env,
    Labels: {
      [LABEL_JOB]: spec.jobId,
      [LABEL_NODE]: ctx.nodeId,
      [LABEL_GPU]: spec.card.uuid,
      ...(cards.length > 1 && { [LABEL_GPUS]: visibleDevices(cards) }),
      [LABEL_NAMESPACE]: ctx.namespace,
      ...(spec.timeoutS && { [LABEL_TIMEOUT]: String(spec.timeoutS) }),
      ...(spec.attempt && { [LABEL_ATTEMPT]: String(spec.attempt) }),
    },
    NetworkDisabled: ctx.limits.network === "none",
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    OpenStdin: false,
    HostConfig: {
      NetworkMode: ctx.limits.network,
      Privileged: false,
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges"],
      ReadonlyRootfs: true,
      Tmpfs: { "/tmp": `rw,nosuid,nodev,size=${TMPFS_MB}m,mode=1777` },
      Binds: [],
      // The job's own volume (never a host path): it outlives the exit, so /out can be archived.
      Mounts: [{ Type: "volume", Source: outVolumeName(spec.jobId), Target: OUT_PATH }],
      PidsLimit: ctx.limits.pids,
      Memory: memoryBytes,
      MemorySwap: memoryBytes, // no swap beyond the memory limit
      NanoCpus: Math.round(ctx.limits.cpus * 1e9),
      ...(ctx.limits.fileMaxBytes && { Ulimits: [{ Name: "fsize", Soft: ctx.limits.fileMaxBytes, Hard: ctx.limits.fileMaxBytes }] }),
      IpcMode: "private",
      ShmSize: (ctx.limits.shmMb ?? DEFAULT_SHM_MB) * 1024 * 1024,
      AutoRemove: false, // the exit code and logs are read first, then the node removes it
      LogConfig: { Type: "json-file", Config: { "max-size": "64m", "max-file": "1" } },
      // Exactly the job's cards, by UUID; a simulated card has no device (asking would fail without the NVIDIA runtime).
      DeviceRequests: real.length ? [{ Driver: "nvidia", DeviceIDs: real.map((c) => c.uuid), Capabilities: [["gpu"]] }] : [],
    },
  };
}

export function imageOf(spec: JobSpec, defaultImage: string): string {
  return spec.containerImage?.trim() || defaultImage;
}

type DockerError = Error & { statusCode?: number; code?: string; json?: { message?: string } | null };

const ADDRESS = /\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b/g;

/**
 * The engine's own explanation, on one line and bounded, without what describes the host: IP
 * addresses are masked, and a socket-level failure only says the engine did not answer.
 */
export function dockerMessage(err: unknown): string {
  const e = err as DockerError;
  if (e?.statusCode === undefined && typeof e?.code === "string") return "the container engine did not answer";
  const raw = (typeof e?.json?.message === "string" && e.json.message) || e?.message || String(err);
  const line = raw
    .replace(/^\(HTTP code \d+\)\s*[a-z ]*-\s*/i, "")
    .replace(ADDRESS, "<address>")
    .replace(/\s+/g, " ")
    .trim();
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}

/**
 * Why a pull failed, as one of a few fixed sentences: the engine's own text can carry what a
 * registry host answered (a NATS banner, once) and never reaches a client; the node logs it.
 */
export function pullFailureReason(err: unknown): string {
  const message = dockerMessage(err);
  if (/manifest unknown|not found|does not exist|pull access denied|unauthorized|authentication required|denied/i.test(message))
    return "the image does not exist in its registry, or the registry requires credentials";
  if (/no such host|dial tcp|connection refused|timeout|unreachable|TLS|x509|did not answer/i.test(message)) return "its registry could not be reached";
  return "its registry did not serve it";
}

const statusOf = (err: unknown) => (err as DockerError)?.statusCode;

function ignoreStatus(...codes: number[]) {
  return (err: unknown) => {
    if (!codes.includes(statusOf(err) ?? 0)) throw err;
  };
}

export class DockerExecutor implements JobExecutor {
  readonly kind = "docker" as const;
  readonly jobsOutliveNode = true;
  /** One pull per image however many jobs wait for it. */
  private readonly pulls = new Map<string, Promise<void>>();
  /** Removals of /out helper containers still under way, by job id. */
  private readonly helpers = new Map<string, Promise<void>>();

  constructor(
    private readonly docker: Docker,
    private readonly context: () => ContainerContext,
    private readonly limits: () => JobLimits,
  ) {}

  /** Throws when no engine answers; what the engine's host has, the base of each job's share. */
  static async engineCapacity(docker: Docker): Promise<{ cpus: number; memoryMb: number }> {
    await docker.ping();
    const info = (await docker.info()) as { NCPU?: number; MemTotal?: number };
    return { cpus: info.NCPU ?? 1, memoryMb: Math.floor((info.MemTotal ?? 0) / (1024 * 1024)) };
  }

  run(spec: JobSpec): RunningJob {
    const limits = limitsOf(spec, this.limits());
    const uuids = jobCards(spec).map((c) => c.uuid);
    return new RunningJob(spec.jobId, spec.card.uuid, this.jobOps({ ...spec, timeoutS: limits.timeoutS }), limits, spec.attempt, uuids);
  }

  /**
   * Containers of this namespace that this node (same node id, or one of its cards) left behind;
   * first, what a crash of it left that no job needs (removeLeftovers).
   */
  async adopt(cardUuids: string[]): Promise<RunningJob[]> {
    const { nodeId, namespace } = this.context();
    await this.removeLeftovers(nodeId, namespace);
    const listed = await this.docker.listContainers({ all: true, filters: { label: [LABEL_JOB] } });
    const mine = listed.filter(
      (c) =>
        c.Labels[LABEL_NAMESPACE] === namespace &&
        (c.Labels[LABEL_NODE] === nodeId || cardUuids.includes(c.Labels[LABEL_GPU])) &&
        JOB_ID_PATTERN.test(c.Labels[LABEL_JOB]),
    );
    const jobs: RunningJob[] = [];
    for (const summary of mine) {
      const container = this.docker.getContainer(summary.Id);
      const info = await container.inspect().catch(() => null);
      if (!info) continue;
      const jobId = summary.Labels[LABEL_JOB];
      const neverStarted = info.State.Status === "created";
      const startedAt = Date.parse(info.State.StartedAt);
      const elapsedMs = Number.isFinite(startedAt) && startedAt > 0 ? Date.now() - startedAt : 0;
      const ops = this.containerOps(container, summary.Labels[LABEL_JOB], neverStarted, undefined, info.State.Running);
      // Its own time limit (a container from before labels had one: the node's), counted from its real start.
      const timeoutS = Number(summary.Labels[LABEL_TIMEOUT]);
      const limits = limitsOf({ timeoutS: Number.isInteger(timeoutS) && timeoutS > 0 ? timeoutS : undefined }, this.limits());
      const attempt = Number(summary.Labels[LABEL_ATTEMPT]); // a container from before attempts: the first
      const limitsNow = { ...limits, elapsedMs, adopted: true };
      const first = summary.Labels[LABEL_GPU] ?? "";
      const uuids = summary.Labels[LABEL_GPUS]?.split(",").filter(Boolean) ?? [first];
      jobs.push(new RunningJob(jobId, first, ops, limitsNow, Number.isInteger(attempt) && attempt > 0 ? attempt : 1, uuids));
    }
    return jobs;
  }

  /**
   * A node that crashed between the steps of prepareOut or of a job's cleanup leaves /out helper
   * containers (never started; no job needs one once its own container holds the volume) and /out
   * volumes no container uses (a job's container is removed only after its /out is archived, and
   * holds the volume from its creation on: a volume without one is garbage, whichever node or
   * namespace made it). Another node's helpers on the same engine may be in use: left alone.
   */
  private async removeLeftovers(nodeId: string, namespace: string): Promise<void> {
    const helpers = await this.docker.listContainers({
      all: true,
      filters: { label: [LABEL_OUT_OF, `${LABEL_NAMESPACE}=${namespace}`, `${LABEL_NODE}=${nodeId}`] },
    });
    await Promise.all(helpers.map((h) => this.docker.getContainer(h.Id).remove({ force: true }).catch(ignoreStatus(404, 409))));
    const { Volumes } = await this.docker.listVolumes({ filters: { dangling: ["true"], name: [OUT_VOLUME_PREFIX] } });
    const unused = (Volumes ?? []).filter((v) => v.Name.startsWith(OUT_VOLUME_PREFIX) && JOB_ID_PATTERN.test(v.Name.slice(OUT_VOLUME_PREFIX.length)));
    // 409: taken by a container created since the listing.
    await Promise.all(unused.map((v) => this.docker.getVolume(v.Name).remove().catch(ignoreStatus(404, 409))));
  }

  private async ensureImage(image: string): Promise<void> {
    let pull = this.pulls.get(image);
    if (!pull) {
      pull = this.pull(image).finally(() => this.pulls.delete(image));
      this.pulls.set(image, pull);
    }
    await pull;
  }

  private async pull(image: string): Promise<void> {
    try {
      const stream = await this.docker.pull(image);
      await new Promise<void>((resolve, reject) => this.docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolve())));
    } catch (err) {
      this.limits().log?.(`Pull of image ${image} failed (engine: ${dockerMessage(err)})`, err);
      throw new JobError(`Container image '${image}' could not be pulled: ${pullFailureReason(err)}`);
    }
  }

  private async create(spec: JobSpec): Promise<Docker.Container> {
    const context = this.context();
    const request = containerSpec(spec, context);
    // Checked before the engine sees the name at all: a present image is refused like a pulled one.
    const allowed = checkImage(request.Image!, context.allowedRegistries);
    if (!allowed.ok) throw new JobError(`Container image '${request.Image}' is not allowed: ${allowed.reason}`);
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer(request);
    } catch (err) {
      if (statusOf(err) !== 404) throw new JobError(`The job's container could not be created: ${dockerMessage(err)}`);
      // Missing image: pull it (once, shared by concurrent jobs) and create again.
      await this.ensureImage(request.Image!);
      try {
        container = await this.docker.createContainer(request);
      } catch (err) {
        throw new JobError(`The job's container could not be created: ${dockerMessage(err)}`);
      }
    }
    await this.prepareOut(spec.jobId, request).catch((err) => {
      throw new JobError(`The job's /out folder could not be prepared: ${dockerMessage(err)}`);
    });
    return container;
  }

  /**
   * A fresh volume belongs to root, mode 755: the job (nobody) could not write to it. The job's
   * own container has a read-only root, so the volume's mode is set through a helper container
   * that is created and removed, never started.
   */
  private async prepareOut(jobId: string, request: Docker.ContainerCreateOptions): Promise<void> {
    const helper = await this.docker.createContainer({
      Image: request.Image,
      Entrypoint: ["/ci-platform-never-started"],
      // Not a job: never adopted; its node removes it after a crash (removeLeftovers).
      Labels: { [LABEL_NAMESPACE]: request.Labels![LABEL_NAMESPACE], [LABEL_NODE]: request.Labels![LABEL_NODE], [LABEL_OUT_OF]: jobId },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: "none", Mounts: [{ Type: "volume", Source: outVolumeName(jobId), Target: OUT_PATH }] },
    });
    // Removed off the job's start path; removeOut waits for it (a volume in use cannot go).
    const removeHelper = () => {
      const removal = helper.remove({ force: true }).then(() => undefined, ignoreStatus(404, 409));
      this.helpers.set(
        jobId,
        removal.finally(() => this.helpers.delete(jobId)),
      );
    };
    try {
      await helper.putArchive(emptyOutTar(), { path: "/" });
    } finally {
      removeHelper();
    }
  }

  private async removeOut(jobId: string): Promise<void> {
    await this.helpers.get(jobId)?.catch(() => undefined);
    await this.docker.getVolume(outVolumeName(jobId)).remove().catch(ignoreStatus(404, 409));
  }

  private jobOps(spec: JobSpec): JobOps {
    let inner: JobOps | undefined;
    let created: Docker.Container | undefined;
    return {
      launch: async (output) => {
        created = await this.create(spec);
        // Attached before it starts, so not a byte is missed (Docker's own log is capped and lossy).
        const attached = await created.attach(attachOptions);
        try {
          await created.start();
        } catch (err) {
          (attached as { destroy?: () => void }).destroy?.();
          throw new JobError(`The job's container could not be started: ${dockerMessage(err)}`);
        }
        inner = this.containerOps(created, spec.jobId, false, attached);
        await inner.launch(output);
      },
      exited: () => inner!.exited(),
      failure: () => inner?.failure?.(),
      kill: (graceS) => inner!.kill(graceS),
      cleanup: async () => {
        if (inner) return inner.cleanup();
        // Created but never started: remove what is left.
        await created?.remove({ force: true }).catch(ignoreStatus(404, 409));
        if (created) await this.removeOut(spec.jobId);
      },
      detach: () => inner?.detach(),
    };
  }

  /**
   * Watching a container: its output (the stream attached before start, or for an adopted one a
   * new attach plus what the engine logged meanwhile), its exit, stop and removal.
   */
  private containerOps(container: Docker.Container, jobId: string, neverStarted: boolean, attached?: NodeJS.ReadableStream, running = true): JobOps {
    let stream: NodeJS.ReadableStream | undefined = attached;
    let logsDone: Promise<void> = Promise.resolve();
    let capture: OutputCapture | undefined;
    // Kept from the stopped container's /out volume (artifacts.ts); a container from before /out has none (404).
    const keepOut = () =>
      keepArtifacts(jobId, this.limits(), capture, async (dest, maxBytes) => {
        const archive = await container.getArchive({ path: OUT_PATH }).catch(ignoreStatus(404));
        return archive ? storeArchive(archive as Readable, dest, maxBytes) : undefined;
      });
    const removeOut = () => this.removeOut(jobId);
    let failure: string | undefined;
    return {
      async launch(output) {
        capture = output;
        if (neverStarted) throw new JobError("The GPU node stopped before the job's container started");
        if (!stream) {
          const attachedAt = Date.now();
          // An exited container has nothing live to attach to (and its attach would not end).
          if (running) stream = await container.attach(attachOptions).catch(() => undefined);
          stream?.pause(); // the gap goes first
          await recoverGap(container, output, output.lastWriteMs, attachedAt).catch(() =>
            output.note("the GPU node was restarting; output printed meanwhile may be missing"),
          );
        }
        if (stream) logsDone = captureStream(stream, output);
      },
      async exited() {
        const result = (await container.wait()) as { StatusCode: number };
        // Killed for memory, it exits 137 like any SIGKILL: only the engine's state tells the two apart.
        const info = await container.inspect().catch(() => undefined);
        if (info?.State.OOMKilled) failure = outOfMemory({ memoryBytes: info.HostConfig.Memory ?? 0 });
        return result.StatusCode;
      },
      failure: () => failure,
      async kill(graceS: number) {
        // 304: already stopped; 404: already gone.
        await container.stop({ t: Math.ceil(graceS) }).catch(ignoreStatus(304, 404));
      },
      async cleanup() {
        const bounded = new Promise<void>((resolve) => setTimeout(resolve, 5000).unref());
        await Promise.race([logsDone, bounded]);
        (stream as { destroy?: () => void } | undefined)?.destroy?.();
        // Before the removal: the archive is read from the stopped container's /out volume.
        await keepOut();
        await container.remove({ force: true }).catch(ignoreStatus(404, 409));
        await removeOut();
      },
      detach() {
        (stream as { destroy?: () => void } | undefined)?.destroy?.();
      },
    };
  }
}
