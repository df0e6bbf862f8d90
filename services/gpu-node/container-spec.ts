/**
 * The create request of a job container, as pure data: what the Docker executor (docker-executor.ts)
 * asks the engine for, and the labels by which a restarted node finds its jobs again.
 */
import type Docker from "dockerode";
import { jobCards, joinedShell, JobSpec, visibleDevices } from "./job";
import { DEFAULT_SHM_MB } from "./settings";

export const LABEL_JOB = "ci-platform.job-id";
export const LABEL_NODE = "ci-platform.node";
export const LABEL_GPU = "ci-platform.gpu-uuid";
/** All the job's cards, comma-separated (LABEL_GPU is the first): a restarted node keeps them busy. */
export const LABEL_GPUS = "ci-platform.gpu-uuids";
export const LABEL_NAMESPACE = "ci-platform.namespace";
/** The job's time limit in seconds: a restarted node that adopts the container keeps it. */
export const LABEL_TIMEOUT = "ci-platform.timeout-s";
export const LABEL_ATTEMPT = "ci-platform.attempt";
/** On the short-lived helper that prepares an /out volume ahead of a job (never started): the volume's name. */
export const LABEL_OUT_OF = "ci-platform.out-of";

/** Writable scratch space of a job (counts against its memory limit). */
const TMPFS_MB = 1024;
/** Where a job leaves files to keep (artifacts.ts). */
export const OUT_PATH = "/out";

/**
 * The Docker volume holding a job's /out. A volume, not a tmpfs: a container's tmpfs is gone the
 * moment it exits, and /out is archived after the exit.
 */
export const OUT_VOLUME_PREFIX = "ci-platform-out-";
export const outVolumeName = (jobId: string): string => `${OUT_VOLUME_PREFIX}${jobId}`;

/**
 * /out as a container mounts it. NoCopy: an image's own /out is never copied into the volume, so
 * it starts empty (only what the job leaves is kept) and keeps the mode it was prepared with.
 */
export const outMount = (volume: string): Docker.MountSettings => ({
  Type: "volume",
  Source: volume,
  Target: OUT_PATH,
  VolumeOptions: { NoCopy: true } as Docker.MountSettings["VolumeOptions"],
});

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

/**
 * The create request of a job container (pure: tested field by field). `outVolume`: a volume
 * prepared ahead for its /out (out-volumes.ts); absent, the job's own, made by the create.
 */
export function containerSpec(spec: JobSpec, ctx: ContainerContext, outVolume = outVolumeName(spec.jobId)): Docker.ContainerCreateOptions {
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
      Mounts: [outMount(outVolume)],
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
