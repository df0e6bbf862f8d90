/**
 * How a gpu-node runs jobs, decided once at start: Docker when an engine answers (or when asked),
 * else sandboxed processes (bubblewrap), else none at all — a node that cannot isolate jobs
 * refuses them (it stays up, unready, announcing no cards) unless the operator explicitly allows
 * unisolated jobs. Also sizes each job's share of the host and refuses overcommitted limits.
 */
import Docker from "dockerode";
import os from "os";
import { ContainerContext, DockerExecutor } from "./docker-executor";
import type { JobExecutor, JobLimits } from "./job";
import { findBwrap, ProcessExecutor, ProcessIsolation, probeSandbox } from "./process-executor";
import { detectCgroups } from "./cgroup-host";
import { describeEnforcement } from "./cgroups";
import { checkImage } from "../../lib/registry-policy";
import { HostCapacity, JobResources, planJobResources } from "./resources";
import type { GpuNodeSettings } from "./settings";
import { relayHost } from "./platform-access";

/** Writable /tmp of a sandboxed job (as the Docker executor's tmpfs). */
const SANDBOX_TMP_MB = 1024;

export type ExecutorLog = { info(m: string): void; warn(m: string): void; error(m: string): void };

export type ExecutorSetup = { executor: JobExecutor; limits: JobResources; ping?: () => Promise<unknown> } | { refusal: string };

export type SetupContext = {
  settings: GpuNodeSettings;
  cards: number;
  nodeId: () => string;
  namespace: () => string;
  jobLimits: () => JobLimits;
  log: ExecutorLog;
};

/** The operator's own words when the host cannot isolate jobs. */
export function refusalMessage(why: string): string {
  return (
    `This GPU node cannot isolate jobs, so it runs none and announces no cards: ${why}. ` +
    "Install bubblewrap (Debian: apt-get install bubblewrap) or a Docker engine, or set " +
    "GPU_UNSAFE_UNISOLATED_JOBS=true to run jobs as plain processes of this node's user (never on a shared host)"
  );
}

/** Each job's memory and CPUs on a host of `capacity`; throws (the node does not start) on overcommit. */
function sizeJobs(capacity: HostCapacity, ctx: SetupContext): JobResources {
  const { jobMemoryMb, jobCpus, allowOvercommit } = ctx.settings;
  const plan = planJobResources(capacity, ctx.cards, { memoryMb: jobMemoryMb, cpus: jobCpus }, allowOvercommit);
  if (!plan.ok) throw new Error(plan.error);
  plan.warnings.forEach((w) => ctx.log.warn(w));
  ctx.log.info(
    `Each job may use ${plan.limits.memoryMb} MiB and ${plan.limits.cpus} CPU(s) (host: ${capacity.memoryMb} MiB, ${capacity.cpus} CPUs, ${ctx.cards} card(s))`,
  );
  return plan.limits;
}

async function dockerCapacity(docker: Docker): Promise<HostCapacity> {
  return Promise.race([
    DockerExecutor.engineCapacity(docker),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no answer within 5 s")), 5000).unref()),
  ]);
}

async function processSetup(ctx: SetupContext): Promise<ExecutorSetup> {
  const limits = sizeJobs({ memoryMb: Math.floor(os.totalmem() / (1024 * 1024)), cpus: os.cpus().length }, ctx);
  if (ctx.settings.unsafeUnisolatedJobs) {
    ctx.log.warn(
      "GPU_UNSAFE_UNISOLATED_JOBS=true: jobs run as plain processes of this node's user, WITHOUT ANY ISOLATION: " +
        "they can read this node's environment and files and reach its network. Never use this on a shared host",
    );
    return { executor: new ProcessExecutor(ctx.jobLimits, { kind: "unisolated" }), limits };
  }
  const bwrap = findBwrap();
  if (!bwrap) return { refusal: refusalMessage("bubblewrap (bwrap) is not installed (not on PATH)") };
  const isolation: ProcessIsolation = {
    kind: "sandbox",
    bwrap,
    uid: ctx.settings.jobUid,
    gid: ctx.settings.jobGid,
    limits: {
      processes: ctx.settings.jobPids,
      memoryBytes: limits.memoryMb * 1024 * 1024,
      tmpBytes: SANDBOX_TMP_MB * 1024 * 1024,
      shmBytes: ctx.settings.jobShmMb * 1024 * 1024,
    },
  };
  const cgroups = await detectCgroups();
  ctx.log[cgroups.layout ? "info" : "warn"](describeEnforcement(cgroups.layout, cgroups.layout ? undefined : cgroups.why));
  if (!cgroups.layout && ctx.settings.requireCgroups)
    return { refusal: `This GPU node runs no jobs: GPU_REQUIRE_CGROUPS=true and this host gives jobs no cgroups of their own (${cgroups.why})` };
  if (cgroups.layout)
    isolation.cgroups = { layout: cgroups.layout, limits: { memoryBytes: limits.memoryMb * 1024 * 1024, pids: ctx.settings.jobPids, cpus: limits.cpus } };
  const broken = await probeSandbox(isolation);
  if (broken) return { refusal: refusalMessage(`the bubblewrap sandbox does not work here (${broken})`) };
  if (process.getuid?.() !== 0)
    ctx.log.warn(`gpu-node does not run as root: sandboxed jobs keep this node's uid outside their user namespace (GPU_JOB_UID applies only to a root node)`);
  ctx.log.info(`Jobs run as uid ${isolation.uid} in a bubblewrap sandbox (${bwrap})`);
  return { executor: new ProcessExecutor(ctx.jobLimits, isolation, relayHost(ctx.settings.relay)), limits };
}

export async function setUpExecutor(ctx: SetupContext): Promise<ExecutorSetup> {
  const settings = ctx.settings;
  const wanted = settings.executor;
  if (wanted === "process") return processSetup(ctx);
  const docker = new Docker(); // DOCKER_HOST and friends, as the docker CLI reads them
  let capacity: HostCapacity;
  try {
    capacity = await dockerCapacity(docker);
  } catch (err) {
    const why = `No Docker engine answers (${(err as Error).message})`;
    if (wanted === "docker" || settings.production) throw new Error(`${why}: gpu-node cannot run jobs (GPU_EXECUTOR=docker)`, { cause: err });
    ctx.log.warn(`${why}: running jobs as sandboxed processes (set GPU_EXECUTOR to choose)`);
    return processSetup(ctx);
  }
  // The engine may run elsewhere (DOCKER_HOST, a VM): its host's memory, or this one's if it does not say.
  if (!capacity.memoryMb) capacity.memoryMb = Math.floor(os.totalmem() / (1024 * 1024));
  const limits = sizeJobs(capacity, ctx);
  const allowedRegistries = settings.allowedRegistries;
  const fallback = checkImage(settings.defaultImage, allowedRegistries);
  if (!fallback.ok)
    throw new Error(`GPU_DEFAULT_IMAGE ${settings.defaultImage} is not allowed (${fallback.reason}): add its registry to GPU_ALLOWED_REGISTRIES`);
  const context = (): ContainerContext => ({
    nodeId: ctx.nodeId(),
    namespace: ctx.namespace(),
    defaultImage: settings.defaultImage,
    limits: {
      memoryMb: limits.memoryMb,
      cpus: limits.cpus,
      pids: settings.jobPids,
      network: settings.jobNetwork,
      shmMb: settings.jobShmMb,
      fileMaxBytes: Math.round(settings.jobOutMaxMb * 1024 * 1024),
    },
    allowedRegistries,
  });
  return { executor: new DockerExecutor(docker, context, ctx.jobLimits, relayHost(ctx.settings.relay)), limits, ping: () => docker.ping() };
}
