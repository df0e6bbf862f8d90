/**
 * gpu-node: one per GPU host. Announces its cards (nvidia-smi, or GPU_SIMULATE) with live
 * telemetry in a heartbeat, runs the jobs the scheduler places on them (Docker by default,
 * bubblewrap-sandboxed processes on hosts without it; executor-setup.ts) and reports each job's life on the durable job-events channel.
 * Internal only: the scheduler calls `run`, `cancel`, `logs`, `follow` and `artifacts` on the node that holds the card.
 *
 * On SIGTERM it refuses new work and publishes what it still has to report. Docker jobs keep
 * running and are re-adopted when the node comes back; process jobs are stopped and failed.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { ensureChannelStreams, ownChannel, sendToChannel } from "../../lib/channels";
import { onAuthenticatedBus } from "../../lib/nats-transporter";
import { brokerEnv } from "../../lib/settings";
import { apiError, validationFailed } from "../../lib/errors";
import {
  HEARTBEAT_EVENT,
  JOB_EVENTS_CHANNEL,
  jobEnvProblem,
  JobEvent,
  FollowPage,
  FollowParams,
  LogsPage,
  LogsParams,
  MAX_JOB_RETRIES,
  MAX_JOB_SECONDS,
  NodeHeartbeat,
  RunJobParams,
} from "../../lib/gpu-protocol";
import { addReadinessCheck } from "../../lib/health";
import { discoverCards, NodeCard, queryNvidiaSmi, simulatedTelemetry } from "./discovery";
import { JOB_ID_PATTERN, JobExecutor, JobLimits, JobOutcome, RunningJob } from "./job";
import { GpuNodeSettings, parseGpuNodeSettings } from "./settings";
import { LogBudget, LOGS_PAGE_BYTES, pruneLogs, readFileChunk, readLogChunk } from "./log-store";
import { artifactPath } from "./artifacts";
import { logFilePath, logKey } from "./output";
import { promises as fsp } from "fs";
import { EventOutbox } from "../../lib/event-outbox";
import { LogFollowers } from "./log-follow";
import { setUpExecutor } from "./executor-setup";
import { IMAGE_NAME_MAX, IMAGE_NAME_PATTERN } from "./registry-policy";

export type CancelParams = { jobId: string };

const JOB_ID = { type: "string", pattern: JOB_ID_PATTERN } as const;
const ATTEMPT = { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_RETRIES + 1, convert: true } as const;
/** A page of a job's file (`logs`, `artifacts`): a bus message must stay small. */
const PAGE_PARAMS = {
  $$strict: "remove",
  jobId: JOB_ID,
  offset: { type: "number", integer: true, min: 0, optional: true, convert: true },
  limit: { type: "number", integer: true, min: 4, max: LOGS_PAGE_BYTES, optional: true, convert: true },
} as const;
const LOG_RETENTION_MS = 7 * 24 * 3600 * 1000;
/** How long a stopping node waits for events to reach JetStream before it gives up on them. */
const FLUSH_ON_STOP_MS = 10_000;

/** Waits for `work`, but no longer than `ms`. */
function within(work: Promise<unknown>, ms: number): Promise<unknown> {
  return Promise.race([work, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
}

type GpuNodeThis = Service & {
  config: GpuNodeSettings;
  cards: NodeCard[];
  executor: JobExecutor;
  jobs: Map<string, RunningJob>;
  tracking: Set<Promise<void>>;
  outbox: EventOutbox<JobEvent>;
  accepting: boolean;
  heartbeats: number;
  timers: NodeJS.Timeout[];
  heartbeatTimer?: NodeJS.Timeout;
  chooseExecutor(): Promise<JobExecutor | undefined>;
  /** Why this node runs no jobs (it cannot isolate them); unset when it can. */
  refusal?: string;
  jobLimits(): JobLimits;
  track(job: RunningJob): void;
  event(job: RunningJob, extra: { type: "started" } | JobOutcome): JobEvent;
  heartbeat(): NodeHeartbeat;
  busyCards(): Set<string>;
  beginHeartbeats(): void;
  sendHeartbeat(): void;
  refreshTelemetry(): Promise<void>;
  pruneLogs(): Promise<void>;
  logBudget: LogBudget;
  noteFinishedLog(logKey: string, jobId: string): Promise<void>;
  followers: LogFollowers;
};

const GpuNodeService: ServiceSchema<ServiceSettingSchema, GpuNodeThis> = {
  name: "gpu-node",
  emits: [{ event: HEARTBEAT_EVENT, kind: "broadcast" }],
  publishes: [JOB_EVENTS_CHANNEL],

  settings: {},

  actions: {
    /**
     * Starts a job on its cards of this node (`gpuUuids`, or `gpuUuid` alone): all of them or
     * none; answers once the executor has it.
     */
    run: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: {
        $$strict: "remove",
        jobId: JOB_ID,
        gpuUuid: { type: "string", min: 1, max: 128 },
        gpuUuids: { type: "array", optional: true, min: 1, max: 16, items: { type: "string", min: 1, max: 128 } },
        command: { type: "string", min: 1, max: 1024 * 1024 },
        containerImage: { type: "string", optional: true, nullable: true, max: IMAGE_NAME_MAX, pattern: IMAGE_NAME_PATTERN },
        timeoutSeconds: { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_SECONDS },
        env: { type: "object", optional: true },
        attempt: ATTEMPT,
      },
      async handler(this: GpuNodeThis, ctx: Context<RunJobParams>): Promise<{ accepted: true }> {
        const { jobId, gpuUuid, command, containerImage, timeoutSeconds, env } = ctx.params;
        const attempt = ctx.params.attempt ?? 1;
        if (this.refusal) throw apiError("SERVICE_UNAVAILABLE", this.refusal);
        const envProblem = env === undefined ? null : jobEnvProblem(env);
        if (envProblem) throw validationFailed([{ field: "env", message: envProblem }]);
        if (!this.accepting) throw apiError("SERVICE_UNAVAILABLE", "This GPU node is shutting down");
        const uuids = ctx.params.gpuUuids ?? [gpuUuid];
        if (uuids[0] !== gpuUuid || new Set(uuids).size !== uuids.length)
          throw validationFailed([{ field: "gpuUuids", message: "The 'gpuUuids' field must list distinct cards, the first being 'gpuUuid'." }]);
        const cards = uuids.map((uuid) => {
          const card = this.cards.find((c) => c.uuid === uuid);
          if (!card) throw apiError("NOT_FOUND", `GPU ${uuid} is not a card of this node`);
          return card;
        });
        const existing = this.jobs.get(jobId);
        if (existing && existing.attempt < attempt) {
          // An earlier attempt the scheduler gave up on (its node was lost, then came back): stop it, the retry comes again.
          void existing.stop("cancel");
          throw apiError("INVALID_STATE", `An earlier attempt of job ${jobId} is still stopping on this node`);
        }
        if (existing?.gpuUuids.join() === uuids.join() && existing.attempt === attempt) return { accepted: true }; // a repeated call: already running
        if (existing) throw apiError("INVALID_STATE", `Job ${jobId} already runs on other cards of this node`);
        const busy = this.busyCards();
        const taken = uuids.find((uuid) => busy.has(uuid));
        if (taken) throw apiError("INVALID_STATE", `GPU ${taken} is busy with another job`);
        const job = this.executor.run({
          jobId,
          card: cards[0],
          cards,
          command,
          containerImage,
          timeoutS: timeoutSeconds ?? this.config.jobTimeoutS,
          env: env as Record<string, string> | undefined, // checked above (jobEnvProblem)
          attempt,
        });
        this.jobs.set(jobId, job);
        this.track(job);
        return { accepted: true };
      },
    },

    /** Stops a job this node runs (also one it adopted after a restart). */
    cancel: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: { $$strict: "remove", jobId: JOB_ID },
      async handler(this: GpuNodeThis, ctx: Context<CancelParams>): Promise<{ stopped: boolean }> {
        const job = this.jobs.get(ctx.params.jobId);
        return { stopped: job ? await job.stop("cancel") : false };
      },
    },

    /** A page of a job's whole output as raw bytes (a bus message must stay small): follow `nextOffset` until null. */
    logs: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: { ...PAGE_PARAMS, attempt: ATTEMPT },
      async handler(this: GpuNodeThis, ctx: Context<LogsParams>): Promise<LogsPage> {
        const page = await readLogChunk(this.config.jobLogDir, logKey(ctx.params.jobId, ctx.params.attempt), ctx.params.offset, ctx.params.limit);
        if (!page) throw apiError("NOT_FOUND", `No output of job ${ctx.params.jobId} (attempt ${ctx.params.attempt ?? 1}) on this node`);
        return page;
      },
    },

    /**
     * Live output of one attempt from `offset`: what is there now, else (while the attempt runs
     * here) the first bytes written within `waitMs` (log-follow.ts); `followStop` ends the wait.
     */
    follow: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: {
        $$strict: "remove",
        jobId: JOB_ID,
        attempt: ATTEMPT,
        offset: { type: "number", integer: true, min: 0 },
        fid: { type: "string", min: 1, max: 64 },
        waitMs: { type: "number", integer: true, min: 0, max: 60_000 },
      },
      async handler(this: GpuNodeThis, ctx: Context<FollowParams>): Promise<FollowPage> {
        const { jobId, offset, fid, waitMs } = ctx.params;
        const attempt = ctx.params.attempt ?? 1;
        const key = logKey(jobId, attempt);
        const live = () => (this.jobs.get(jobId)?.attempt ?? 0) === attempt;
        const read = async () => (await readLogChunk(this.config.jobLogDir, key, offset))?.data ?? "";
        let data = await read();
        if (!data && waitMs > 0 && live()) {
          await this.followers.wait(fid, logFilePath(this.config.jobLogDir, key), offset, waitMs, live);
          data = await read();
        }
        return { data, end: offset + Buffer.byteLength(data, "base64"), live: live() };
      },
    },

    /** The client of follow `fid` left: its page in flight returns now, and later ones at once. */
    followStop: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: { $$strict: "remove", fid: { type: "string", min: 1, max: 64 } },
      handler(this: GpuNodeThis, ctx: Context<{ fid: string }>): { stopped: boolean } {
        return { stopped: this.followers.stop(ctx.params.fid) };
      },
    },

    /** A page of the tar of what the job left under /out, paged as `logs`; NOT_FOUND when it left nothing (or not yet). */
    artifacts: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: PAGE_PARAMS,
      async handler(this: GpuNodeThis, ctx: Context<LogsParams>): Promise<LogsPage> {
        const page = await readFileChunk(artifactPath(this.config.jobLogDir, ctx.params.jobId), ctx.params.offset, ctx.params.limit);
        if (!page) throw apiError("NOT_FOUND", `No artifacts of job ${ctx.params.jobId} on this node`);
        return page;
      },
    },
  },

  events: {
    /**
     * Moleculer tells other nodes about this node's actions up to 1 s after start (a debounced
     * INFO): tell them now, then begin heartbeats, so a scheduler can call the node it hears from.
     */
    async "$broker.started"(this: GpuNodeThis) {
      const registry = this.broker.registry as unknown as { discoverer: { sendLocalNodeInfo(): Promise<void> } };
      await registry.discoverer.sendLocalNodeInfo().catch((err) => this.logger.warn("Node info not sent", err));
      this.beginHeartbeats();
    },
    /** A scheduler that just joined hears about this node at once, not a heartbeat later. */
    "$node.connected"(this: GpuNodeThis) {
      if (this.accepting && this.heartbeatTimer) setTimeout(() => this.sendHeartbeat(), 0);
    },
  },

  methods: {
    /** Docker, sandboxed processes, or (no isolation possible) a refusal that keeps the node unready and card-less. */
    async chooseExecutor(this: GpuNodeThis): Promise<JobExecutor | undefined> {
      const setup = await setUpExecutor({
        settings: this.config,
        cards: this.cards.length,
        nodeId: () => this.broker.nodeID,
        namespace: () => this.broker.namespace,
        jobLimits: () => this.jobLimits(),
        log: this.logger,
      });
      if ("refusal" in setup) {
        this.refusal = setup.refusal;
        this.logger.error(setup.refusal);
        addReadinessCheck(this, "job-isolation", async () => Promise.reject(new Error(setup.refusal)));
        return undefined;
      }
      if (setup.ping) addReadinessCheck(this, "docker", setup.ping);
      return setup.executor;
    },

    jobLimits(this: GpuNodeThis): JobLimits {
      return {
        timeoutS: this.config.jobTimeoutS,
        graceS: this.config.stopGraceS,
        logDir: this.config.jobLogDir,
        outputMaxBytes: Math.round(this.config.jobOutputMaxMb * 1024 * 1024),
        outMaxBytes: Math.round(this.config.jobOutMaxMb * 1024 * 1024),
        log: (message, err) => this.logger.error(message, err),
      };
    },

    /** Reports the job's start and its one outcome, in that order, through the outbox. */
    track(this: GpuNodeThis, job: RunningJob) {
      const done = (async () => {
        if (await job.started) this.outbox.push(this.event(job, { type: "started" }));
        const outcome = await job.outcome;
        if (this.jobs.get(job.jobId) === job) this.jobs.delete(job.jobId);
        if (outcome) this.outbox.push(this.event(job, outcome));
        if (outcome) await this.noteFinishedLog(job.logKey, job.jobId); // a finished log may take the node over its storage cap
      })().catch((err) => this.logger.error(`Reporting job ${job.jobId} failed`, err));
      this.tracking.add(done);
      void done.finally(() => this.tracking.delete(done));
    },

    /** `started` is stamped with the job's real start (after any image pull); an outcome carries it too. */
    event(this: GpuNodeThis, job: RunningJob, extra: { type: "started" } | JobOutcome): JobEvent {
      const startedAt = job.startedAt?.toISOString();
      const base = { jobId: job.jobId, nodeId: this.broker.nodeID, gpuUuid: job.gpuUuid, attempt: job.attempt, at: new Date().toISOString() };
      if (extra.type === "started") return { ...extra, ...base, at: startedAt ?? base.at };
      return { ...extra, ...base, ...(startedAt && { startedAt }) } as JobEvent;
    },

    /** Every card of every job this node runs. */
    busyCards(this: GpuNodeThis): Set<string> {
      return new Set([...this.jobs.values()].flatMap((j) => j.gpuUuids));
    },

    heartbeat(this: GpuNodeThis): NodeHeartbeat {
      const busy = this.busyCards();
      const cards = this.cards.map(({ simulated, ...card }) =>
        simulated ? { ...card, ...simulatedTelemetry(card.memoryTotal, busy.has(card.uuid), this.heartbeats) } : card,
      );
      return { nodeId: this.broker.nodeID, cards, runningJobIds: [...this.jobs.keys()], executor: this.executor.kind, at: new Date().toISOString() };
    },

    beginHeartbeats(this: GpuNodeThis) {
      if (!this.accepting || this.heartbeatTimer) return;
      this.sendHeartbeat();
      this.heartbeatTimer = setInterval(() => this.sendHeartbeat(), this.config.heartbeatS * 1000);
    },

    sendHeartbeat(this: GpuNodeThis) {
      this.heartbeats++;
      this.broker.broadcast(HEARTBEAT_EVENT, this.heartbeat()).catch((err) => this.logger.warn("Heartbeat not sent", err));
    },

    /** Keeps job logs within 7 days and GPU_JOB_LOG_MAX_TOTAL_MB; running jobs' logs stay. */
    async pruneLogs(this: GpuNodeThis) {
      const maxTotalBytes = Math.round(this.config.jobLogMaxTotalMb * 1024 * 1024);
      const result = await pruneLogs(this.config.jobLogDir, {
        maxAgeMs: LOG_RETENTION_MS,
        maxTotalBytes,
        active: new Set([...this.jobs.values()].map((j) => j.logKey)),
      }).catch((err) => {
        this.logger.warn(`Job logs not pruned: ${(err as Error).message}`);
        return null;
      });
      if (!result) return;
      this.logBudget.scanned(result.keptBytes);
      const removed = result.removed;
      if (removed.length) this.logger.info(`Removed ${removed.length} old job log(s) (retention or GPU_JOB_LOG_MAX_TOTAL_MB)`);
    },

    /** Counts a finished attempt's log (and the job's artifacts) against the node's cap; scans and prunes only when it is crossed. */
    async noteFinishedLog(this: GpuNodeThis, key: string, jobId: string) {
      const sizeOf = async (file: string) => (await fsp.stat(file).catch(() => null))?.size ?? 0;
      const size = (await sizeOf(logFilePath(this.config.jobLogDir, key))) + (await sizeOf(artifactPath(this.config.jobLogDir, jobId)));
      if (this.logBudget.add(size)) await this.pruneLogs();
    },

    /** Live values for real cards; a failing nvidia-smi keeps the last ones (and says so). */
    async refreshTelemetry(this: GpuNodeThis) {
      if (this.cards.every((c) => c.simulated)) return;
      const result = await queryNvidiaSmi();
      if (result.kind !== "cards") {
        this.logger.warn(`GPU telemetry not refreshed: ${result.kind === "error" ? result.message : "nvidia-smi is gone"}`);
        return;
      }
      for (const fresh of result.cards) {
        const card = this.cards.find((c) => c.uuid === fresh.uuid);
        if (card) Object.assign(card, { memoryUsed: fresh.memoryUsed, utilization: fresh.utilization, temperature: fresh.temperature });
      }
    },
  },

  created(this: GpuNodeThis) {
    this.config = parseGpuNodeSettings(brokerEnv(this.broker));
    this.jobs = new Map();
    this.followers = new LogFollowers();
    this.logBudget = new LogBudget(Math.round(this.config.jobLogMaxTotalMb * 1024 * 1024));
    this.tracking = new Set();
    this.timers = [];
    this.heartbeats = 0;
    this.accepting = false;
    this.outbox = new EventOutbox<JobEvent>({
      // On its own subject, the only one its NATS credential may publish job events on (lib/channels.ts).
      publish: (event) => sendToChannel(this.broker, ownChannel(JOB_EVENTS_CHANNEL, this.broker.nodeID), event),
      // Until the channel adapter connects (just after start) publishing fails: quiet retries.
      onRetry: (err, attempt, event) => {
        if (attempt === 5 || attempt % 50 === 0)
          this.logger.warn(`Job event ${event.type} of ${event.jobId} not delivered yet (attempt ${attempt}): ${(err as Error).message}`);
      },
    });
  },

  async started(this: GpuNodeThis) {
    this.cards = await discoverCards({
      nodeId: this.broker.nodeID,
      simulate: this.config.simulate,
      production: this.config.production,
      warn: (message) => this.logger.warn(message),
    });
    const executor = await this.chooseExecutor();
    if (!executor) return; // refused: never accepting, so no heartbeat ever offers its cards
    this.executor = executor;
    // On an authenticated bus the stream is the scheduler's to create (a node has no JetStream
    // admin rights; the outbox retries until it exists); on an open bus the node may create it.
    if (!onAuthenticatedBus(this.broker as never)) await ensureChannelStreams(this.broker, [JOB_EVENTS_CHANNEL]);
    for (const job of await this.executor.adopt(this.cards.map((c) => c.uuid))) {
      this.logger.info(`Adopted job ${job.jobId} left behind by an earlier run of this node`);
      this.jobs.set(job.jobId, job);
      this.track(job);
    }
    void this.pruneLogs();
    this.accepting = true;
    this.timers.push(
      setInterval(() => void this.refreshTelemetry(), this.config.telemetryS * 1000),
      setInterval(() => void this.pruneLogs(), 3600_000),
    );
    if (this.broker.started) this.beginHeartbeats(); // created on a running broker: no $broker.started
    const names = this.cards.map((c) => `${c.name}${c.simulated ? " (simulated)" : ""}`).join(", ");
    this.logger.info(`gpu-node ready: ${this.cards.length} card(s) [${names}], ${this.executor.kind} executor`);
  },

  async stopped(this: GpuNodeThis) {
    this.accepting = false;
    this.followers.stopAll();
    this.timers.forEach(clearInterval);
    clearInterval(this.heartbeatTimer);
    const jobs = [...this.jobs.values()];
    if (this.executor?.jobsOutliveNode) {
      // Let launches in progress settle, so each container is either running (adopted later) or reported.
      await within(Promise.all(jobs.map((j) => j.started)), FLUSH_ON_STOP_MS);
      for (const job of jobs) job.detach();
    } else {
      await Promise.all(jobs.map((j) => j.stop("shutdown")));
    }
    await within(Promise.all([...this.tracking]), FLUSH_ON_STOP_MS);
    if (!(await this.outbox.flush(FLUSH_ON_STOP_MS))) this.logger.error("Some job events could not be delivered before the node stopped");
    const lost = this.outbox.close();
    if (lost.length) this.logger.error(`Undelivered job events: ${JSON.stringify(lost.map(({ type, jobId }) => ({ type, jobId })))}`);
  },
};

export default GpuNodeService;
