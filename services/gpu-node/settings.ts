/** The gpu-node's settings (README "Configuration"), parsed when it is created. */
import os from "os";
import path from "path";
import { Env, flag, httpUrl, int, isProductionEnv, oneOf, optionalInt, optionalPositive, positive, SettingError, text } from "../../lib/settings";
import { EXECUTOR_KINDS, type ExecutorKind } from "../../lib/gpu-protocol";
import { parseAllowedRegistries } from "../../lib/registry-policy";
import { RELAY_SSL_MODES, type RelaySslMode } from "./relay";

export type GpuNodeSettings = {
  production: boolean;
  /** `docker` or `process` (sandboxed); undefined: docker, or process outside production when no engine answers. */
  executor?: ExecutorKind;
  /** Cards to report when the host has none, `name:memoryMiB,…` (discovery.ts). */
  simulate?: string;
  defaultImage: string;
  /** Registries job images may come from (registry-policy.ts). */
  allowedRegistries: string[];
  /** A job running longer than its own limit, or this one when the run call names none, is stopped and failed. */
  jobTimeoutS: number;
  heartbeatS: number;
  telemetryS: number;
  /** Limits of a job (CPUs are capped at what the engine has); undefined: host / cards (resources.ts). */
  jobMemoryMb?: number;
  jobCpus?: number;
  /** Start even when cards × GPU_JOB_MEMORY_MB or × GPU_JOB_CPUS exceed the host. */
  allowOvercommit: boolean;
  /** Process jobs run WITHOUT the bubblewrap sandbox, as the node's own user (never on a shared host). */
  unsafeUnisolatedJobs: boolean;
  /** uid and gid sandboxed process jobs run as (when the node runs as root). */
  jobUid: number;
  jobGid: number;
  jobPids: number;
  /** A process-executor node whose host cannot give each job its own cgroup runs no jobs (instead of running them without). */
  requireCgroups: boolean;
  /** Docker network of job containers; `none` keeps untrusted code off every network. */
  jobNetwork: string;
  /** Size of each job's /dev/shm in MiB (PyTorch DataLoader workers share tensors through it). */
  jobShmMb: number;
  /** What a job leaves under /out is kept up to this many MiB (as a tar); also the largest file a job may write. */
  jobOutMaxMb: number;
  /** Seconds between SIGTERM and SIGKILL when a job is cancelled or times out. */
  stopGraceS: number;
  /** Seconds between SIGTERM and SIGKILL when a preemptible job is stopped for a waiting job (GPU_PREEMPT_GRACE_S). */
  preemptGraceS: number;
  /** Where the node keeps each job's whole output (`<jobId>.log`). */
  jobLogDir: string;
  /** A job's log file stops at this many MiB (a note says how much was cut; the result keeps the true tail). */
  jobOutputMaxMb: number;
  /** All job logs on the node together stay under this many MiB (oldest finished jobs' logs go first). */
  jobLogMaxTotalMb: number;
  /** The relay of jobs with platform access (issue 28, relay.ts): its two fixed destinations, and where its per-job socket folders go. */
  relay: RelaySettings;
  /** GPU_SERVE_LISTEN: where the direct serve channel listens (serve-direct.ts); unset: replicas are reached over the bus only. */
  serveListen?: { host: string; port: number };
  /** GPU_SERVE_ADDRESS: the host inference connects to for it (by default the listening one). */
  serveAddress?: string;
};

export type RelaySettings = {
  /** GPU_RELAY_PLATFORM_URL: the platform's HTTP API as this node reaches it; unset: jobs with platform access are refused. */
  platformUrl?: string;
  /** GPU_RELAY_DATABASE_HOST/PORT: the tenant PostgreSQL server (as dbaas's DBAAS_ADMIN_URL names it); unset: no databases. */
  databaseHost?: string;
  databasePort: number;
  /** How the relay speaks TLS to the tenant server (the job's own leg stays inside the host, plain). */
  databaseSslMode: RelaySslMode;
  /** A CA file the tenant server's certificate is checked against (verify-full). */
  databaseCaFile?: string;
  /** Each job's socket folder is made under this one. */
  dir: string;
};

/** GPU_JOB_SHM_MB's default: 1 GiB of /dev/shm (Docker's own default, 64 MiB, breaks multi-worker data loading). */
export const DEFAULT_SHM_MB = 1024;

/** GPU_HEARTBEAT_S: how often a node says it is alive (the scheduler reads it too, for its warm-up). */
export const parseHeartbeatS = (env: Env): number => positive(env, "GPU_HEARTBEAT_S", 2);

/** JOB_TIMEOUT_S: the time limit of a job that sets no `timeoutSeconds` (the scheduler stores it with the job; a node applies it to a run call without one). */
export const parseJobTimeoutS = (env: Env): number => positive(env, "JOB_TIMEOUT_S", 3600);

export const parseGpuNodeSettings = (env: Env): GpuNodeSettings => ({
  production: isProductionEnv(env),
  executor: oneOf(env, "GPU_EXECUTOR", EXECUTOR_KINDS),
  simulate: text(env, "GPU_SIMULATE"),
  defaultImage: text(env, "GPU_DEFAULT_IMAGE", "nvidia/cuda:12.4.1-base-ubuntu22.04"),
  allowedRegistries: parseAllowedRegistries(env.GPU_ALLOWED_REGISTRIES),
  jobTimeoutS: parseJobTimeoutS(env),
  heartbeatS: parseHeartbeatS(env),
  telemetryS: positive(env, "GPU_TELEMETRY_S", 5),
  jobMemoryMb: optionalInt(env, "GPU_JOB_MEMORY_MB"),
  jobCpus: optionalPositive(env, "GPU_JOB_CPUS"),
  allowOvercommit: flag(env, "GPU_ALLOW_OVERCOMMIT"),
  unsafeUnisolatedJobs: flag(env, "GPU_UNSAFE_UNISOLATED_JOBS"),
  jobUid: int(env, "GPU_JOB_UID", 65534),
  jobGid: int(env, "GPU_JOB_GID", 65534),
  jobPids: int(env, "GPU_JOB_PIDS", 1024),
  requireCgroups: flag(env, "GPU_REQUIRE_CGROUPS"),
  jobNetwork: text(env, "GPU_JOB_NETWORK", "none"),
  jobShmMb: positive(env, "GPU_JOB_SHM_MB", DEFAULT_SHM_MB),
  jobOutMaxMb: positive(env, "GPU_JOB_OUT_MAX_MB", 1024),
  stopGraceS: positive(env, "GPU_STOP_GRACE_S", 10),
  preemptGraceS: positive(env, "GPU_PREEMPT_GRACE_S", 30),
  jobLogDir: text(env, "GPU_JOB_LOG_DIR", path.join(os.tmpdir(), "ci-platform-jobs")),
  jobOutputMaxMb: positive(env, "GPU_JOB_OUTPUT_MAX_MB", 64),
  jobLogMaxTotalMb: positive(env, "GPU_JOB_LOG_MAX_TOTAL_MB", 2048),
  relay: {
    platformUrl: httpUrl("GPU_RELAY_PLATFORM_URL", text(env, "GPU_RELAY_PLATFORM_URL")),
    databaseHost: text(env, "GPU_RELAY_DATABASE_HOST"),
    databasePort: int(env, "GPU_RELAY_DATABASE_PORT", 5432),
    databaseSslMode: oneOf(env, "GPU_RELAY_DATABASE_SSLMODE", RELAY_SSL_MODES) ?? "prefer",
    databaseCaFile: text(env, "GPU_RELAY_DATABASE_CA"),
    dir: text(env, "GPU_RELAY_DIR", path.join(os.tmpdir(), "ci-platform-relay")),
  },
  ...serveSettings(env),
});

/** GPU_SERVE_LISTEN and GPU_SERVE_ADDRESS: one listening on every address must say which one inference connects to. */
function serveSettings(env: Env): Pick<GpuNodeSettings, "serveListen" | "serveAddress"> {
  const serveListen = hostPort(env, "GPU_SERVE_LISTEN");
  const serveAddress = text(env, "GPU_SERVE_ADDRESS")?.trim();
  if (serveListen && !serveAddress && ["0.0.0.0", "::"].includes(serveListen.host))
    throw new SettingError("GPU_SERVE_ADDRESS", "", "the host inference connects to when GPU_SERVE_LISTEN listens on every address");
  return { serveListen, serveAddress };
}

/** `host:port` (port 0: any free one; an IPv6 host in brackets), or undefined when unset. */
function hostPort(env: Env, name: string): { host: string; port: number } | undefined {
  const raw = text(env, name)?.trim();
  if (!raw) return undefined;
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(raw);
  const port = Number(match?.[2]);
  if (!match || port > 65535) throw new SettingError(name, raw, "host:port");
  return { host: match[1].replace(/^\[|\]$/g, ""), port };
}
