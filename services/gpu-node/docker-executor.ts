/**
 * The Docker executor (default): each job runs as untrusted code in its own container. The card
 * is handed over by UUID through a device request (never privileged, never all GPUs); the
 * container runs as nobody with every capability dropped, no new privileges, a read-only root,
 * pids/memory/CPU limits, no host mounts and no network unless the operator allows one.
 * Containers carry labels so a restarted node finds the jobs it left running.
 */
import type Docker from "dockerode";
import { checkImage } from "../../lib/registry-policy";
import { JOB_ID_PATTERN, jobCards, JobError, JobExecutor, JobLimits, JobOps, JobSpec, limitsOf, RunningJob } from "./job";
import { attachOptions } from "./docker-output";
import { containerOps, type WatchedContainer } from "./docker-container-ops";
import { OutVolumes } from "./out-volumes";
import {
  ContainerContext,
  containerSpec,
  LABEL_ATTEMPT,
  LABEL_GPU,
  LABEL_GPUS,
  LABEL_JOB,
  LABEL_NAMESPACE,
  LABEL_NODE,
  LABEL_TIMEOUT,
  imageOf,
  OUT_PATH,
  outVolumeName,
} from "./container-spec";
import { dockerMessage, ignoreStatus, pullFailureReason, statusOf } from "./docker-errors";
import { openPlatformAccess, PlatformAccess, RelayHost, reopenRelay } from "./platform-access";
import { closingRelay, closingServe, CONTAINER_USER, LABEL_RELAY, LABEL_SERVE, withForwarder } from "./docker-relay";
import { openServeSocket, serveDir, type ServeSocket } from "./serve-relay";

/** The owner of a Docker job's relay folder: the containers' user, when the node is root. */
const relayOwner = () => (process.getuid?.() === 0 ? CONTAINER_USER : undefined);

// Importable from here as before (tests, bench and scripts name the executor's module).
export * from "./container-spec";
export { dockerMessage, pullFailureReason } from "./docker-errors";

/** How long a failed pull of an image stands for the jobs that ask for it next. */
const FAILED_PULL_MEMORY_MS = 10_000;

export class DockerExecutor implements JobExecutor {
  readonly kind = "docker" as const;
  readonly jobsOutliveNode = true;
  /** One pull per image however many jobs wait for it. */
  private readonly pulls = new Map<string, Promise<void>>();
  /** Each job's /out volume, and what a crash left of them. */
  private readonly outVolumes: OutVolumes;

  constructor(
    private readonly docker: Docker,
    private readonly context: () => ContainerContext,
    private readonly limits: () => JobLimits,
    /** The node's relay for jobs with platform access (absent: such jobs fail with the reason). */
    private readonly relay?: RelayHost,
  ) {
    this.outVolumes = new OutVolumes(docker, (message, err) => this.limits().log?.(message, err));
  }

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
   * first, what a crash of it left that no job needs (OutVolumes.removeLeftovers).
   */
  async adopt(cardUuids: string[]): Promise<RunningJob[]> {
    const { nodeId, namespace } = this.context();
    await this.outVolumes.removeLeftovers(nodeId, namespace);
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
      const relayed = summary.Labels[LABEL_RELAY];
      const relay = relayed // reopened even for one that ended meanwhile: its cleanup then removes the folder
        ? await reopenRelay(jobId, relayed.includes("database"), this.relay, relayOwner()).catch(
            (err) => void this.limits().log?.(`The relay of job ${jobId} could not be reopened`, err),
          )
        : undefined;
      // A container from before /out has none.
      const outVolume = info.Mounts.find((m) => m.Type === "volume" && m.Destination === OUT_PATH)?.Name;
      // A replica's serve folder stays bound (its forwarder's socket lives on): removed once it ends.
      const served = summary.Labels[LABEL_SERVE] && this.relay ? serveDir(this.relay.dir, jobId) : undefined;
      const ops = closingServe(closingRelay(this.watch({ container, jobId, neverStarted, outVolume, running: info.State.Running }), relay), served);
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

  /** Resolves once the /out volumes being prepared ahead of the next jobs are ready. */
  preparedAhead(): Promise<void> {
    return this.outVolumes.settled();
  }

  release(): Promise<void> {
    return this.outVolumes.release();
  }

  private async ensureImage(image: string): Promise<void> {
    let pull = this.pulls.get(image);
    if (!pull) {
      const made = this.pull(image);
      const forget = () => {
        if (this.pulls.get(image) === made) this.pulls.delete(image);
      };
      // A failed pull answers for its image a while: a burst of jobs for a missing image asks the registry once.
      made.then(forget, () => setTimeout(forget, FAILED_PULL_MEMORY_MS).unref());
      this.pulls.set(image, made);
      pull = made;
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

  /** The job's container, with its /out volume prepared (one prepared ahead, or its own); with the relay's mounts when it has platform access. */
  private async create(spec: JobSpec, access?: PlatformAccess, serve?: ServeSocket): Promise<{ container: Docker.Container; outVolume: string }> {
    const context = this.context();
    // Checked before the engine sees the name at all: a present image is refused like a pulled one.
    const image = imageOf(spec, context.defaultImage);
    const allowed = checkImage(image, context.allowedRegistries);
    if (!allowed.ok) throw new JobError(`Container image '${image}' is not allowed: ${allowed.reason}`);
    const ahead = await this.outVolumes.take();
    const plain = containerSpec(spec, context, ahead);
    const request = access || serve ? withForwarder(plain, { access, serve }) : plain;
    const outVolume = ahead ?? outVolumeName(spec.jobId);
    let container: Docker.Container;
    try {
      container = await this.createContainer(request);
    } catch (err) {
      if (ahead) await this.outVolumes.remove(ahead).catch(() => undefined);
      throw err;
    }
    if (!ahead) {
      await this.outVolumes.prepare(outVolume, image, context).catch(async (err) => {
        await container.remove({ force: true }).catch(() => undefined);
        await this.outVolumes.remove(outVolume).catch(() => undefined);
        throw new JobError(`The job's /out folder could not be prepared: ${dockerMessage(err)}`);
      });
    }
    return { container, outVolume };
  }

  private async createContainer(request: Docker.ContainerCreateOptions): Promise<Docker.Container> {
    try {
      return await this.docker.createContainer(request);
    } catch (err) {
      if (statusOf(err) !== 404) throw new JobError(`The job's container could not be created: ${dockerMessage(err)}`);
    }
    // Missing image: pull it (once, shared by concurrent jobs) and create again.
    await this.ensureImage(request.Image!);
    try {
      return await this.docker.createContainer(request);
    } catch (err) {
      throw new JobError(`The job's container could not be created: ${dockerMessage(err)}`);
    }
  }

  private jobOps(spec: JobSpec): JobOps {
    let inner: JobOps | undefined;
    let created: { container: Docker.Container; outVolume: string } | undefined;
    let access: PlatformAccess | undefined;
    let serve: ServeSocket | undefined;
    return {
      launch: async (output) => {
        // Owned by the containers' user (65534), which alone connects to its sockets.
        if (spec.platform) access = await openPlatformAccess(spec.jobId, spec.platform, this.relay, relayOwner());
        if (spec.servePort != null) {
          if (!this.relay) throw new JobError("This GPU node cannot serve a deployment's replica (it has no relay folder)");
          serve = await openServeSocket(this.relay.dir, spec.jobId, spec.servePort, relayOwner());
        }
        created = await this.create(spec, access, serve);
        const { container, outVolume } = created;
        // Attached before it starts, so not a byte is missed (Docker's own log is capped and lossy).
        const attached = await container.attach(attachOptions);
        try {
          await container.start();
        } catch (err) {
          (attached as { destroy?: () => void }).destroy?.();
          throw new JobError(`The job's container could not be started: ${dockerMessage(err)}`);
        }
        // Once it runs: the next job's /out is prepared while this one works, not while it starts.
        this.outVolumes.refill(imageOf(spec, this.context().defaultImage), this.context());
        inner = this.watch({ container, jobId: spec.jobId, neverStarted: false, outVolume, attached });
        await inner.launch(output);
      },
      exited: () => inner!.exited(),
      failure: () => inner?.failure?.(),
      kill: (graceS) => inner!.kill(graceS),
      cleanup: async () => {
        try {
          if (inner) return await inner.cleanup();
          // Created but never started: remove what is left.
          if (!created) return;
          await created.container.remove({ force: true }).catch(ignoreStatus(404, 409));
          await this.outVolumes.remove(created.outVolume);
        } finally {
          await access?.relay.close();
          await serve?.close();
        }
      },
      detach: () => {
        inner?.detach();
        void access?.relay.letGo();
      },
    };
  }

  /** Watching a container (docker-container-ops.ts), with this executor's /out volumes and limits. */
  private watch(target: Omit<WatchedContainer, "outVolumes" | "limits">): JobOps {
    return containerOps({ ...target, outVolumes: this.outVolumes, limits: () => this.limits() });
  }
}
