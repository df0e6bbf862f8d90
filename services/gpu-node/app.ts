/**
 * The gpu-node's composition: its cards, its executor, the jobs it runs, the queue of their
 * events, heartbeats, telemetry and log upkeep, put together once and started and stopped as
 * one. gpu-node.service.ts hands each action and lifecycle hook over to what this returns.
 */
import type { LoggerInstance, ServiceBroker } from "moleculer";
import { ensureChannelStreams, ownChannel, sendToChannel } from "../../lib/channels";
import { HEARTBEAT_EVENT, JOB_EVENTS_CHANNEL, JobEvent } from "../../lib/gpu-protocol";
import type { RunJobParams } from "../../lib/job-spec";
import type { ReadinessCheck } from "../../lib/health";
import { onAuthenticatedBus } from "../../lib/nats-transporter";
import { PublishQueue } from "../../lib/publish-queue";
import { admissionError, admitJob } from "./admission";
import { discoverCards, NodeCard, refreshTelemetry } from "./discovery";
import { setUpExecutor } from "./executor-setup";
import type { JobExecutor, JobLimits, RunningJob } from "./job";
import { NodeLogs } from "./node-logs";
import { heartbeatOf, jobEventOf } from "./reports";
import type { GpuNodeSettings } from "./settings";

/** How long a stopping node waits for events to reach JetStream before it gives up on them. */
const FLUSH_ON_STOP_MS = 10_000;

/** Waits for `work`, but no longer than `ms`. */
function within(work: Promise<unknown>, ms: number): Promise<unknown> {
  return Promise.race([work, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
}

export type GpuNodeDeps = {
  config: GpuNodeSettings;
  broker: ServiceBroker;
  logger: LoggerInstance;
  addReadinessCheck: (name: string, check: ReadinessCheck) => void;
  /** Which executor runs the jobs (the service's method, so a mixin may swap it); by default `chooseExecutor` of the result. */
  executor?: () => Promise<JobExecutor | undefined>;
};

export type GpuNode = {
  readonly config: GpuNodeSettings;
  /** The jobs this node runs (also those it adopted after a restart), by id. */
  readonly jobs: ReadonlyMap<string, RunningJob>;
  /** Its cards, known once started. */
  readonly cards: readonly NodeCard[];
  /** Unset until started, and on a node that refuses jobs. */
  readonly executor: JobExecutor | undefined;
  /** Job events on their way to the durable channel (retried until delivered). */
  readonly events: PublishQueue<JobEvent>;
  readonly logs: NodeLogs;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Starts a job on its cards of this node (admission.ts): all of them or none. */
  run(params: RunJobParams): { accepted: true };
  /** `preempt`: stopped for a waiting job (GPU_PREEMPT_GRACE_S); it ends `cancelled` either way. */
  cancel(jobId: string, preempt?: boolean): Promise<{ stopped: boolean }>;
  /** Docker, sandboxed processes, or (no isolation possible) a refusal that keeps the node unready and card-less. */
  chooseExecutor(): Promise<JobExecutor | undefined>;
  jobLimits(): JobLimits;
  /** The broker is up: tell other nodes about this node's actions now, then begin heartbeats. */
  announce(): Promise<void>;
  /** A scheduler that just joined hears about this node at once, not a heartbeat later. */
  greetNewNode(): void;
};

export function createGpuNode(deps: GpuNodeDeps): GpuNode {
  const { config, broker, logger } = deps;
  const jobs = new Map<string, RunningJob>();
  const tracking = new Set<Promise<void>>();
  const timers: NodeJS.Timeout[] = [];
  let cards: NodeCard[] = [];
  let executor: JobExecutor | undefined;
  /** Why this node runs no jobs (it cannot isolate them); unset when it can. */
  let refusal: string | undefined;
  let accepting = false;
  let heartbeats = 0;
  let heartbeatTimer: NodeJS.Timeout | undefined;

  const events = new PublishQueue<JobEvent>({
    // On its own subject, the only one its NATS credential may publish job events on (lib/channels.ts).
    publish: (event) => sendToChannel(broker, ownChannel(JOB_EVENTS_CHANNEL, broker.nodeID), event),
    // Until the channel adapter connects (just after start) publishing fails: quiet retries.
    onRetry: (err, attempt, event) => {
      if (attempt === 5 || attempt % 50 === 0)
        logger.warn(`Job event ${event.type} of ${event.jobId} not delivered yet (attempt ${attempt}): ${(err as Error).message}`);
    },
  });
  const logs = new NodeLogs({
    logDir: config.jobLogDir,
    maxTotalMb: config.jobLogMaxTotalMb,
    logger,
    runningAttempt: (jobId) => jobs.get(jobId)?.attempt,
    activeLogKeys: () => new Set([...jobs.values()].map((j) => j.logKey)),
  });

  const jobLimits = (): JobLimits => ({
    timeoutS: config.jobTimeoutS,
    graceS: config.stopGraceS,
    preemptGraceS: config.preemptGraceS,
    logDir: config.jobLogDir,
    outputMaxBytes: Math.round(config.jobOutputMaxMb * 1024 * 1024),
    outMaxBytes: Math.round(config.jobOutMaxMb * 1024 * 1024),
    log: (message, err) => logger.error(message, err),
  });

  async function chooseExecutor(): Promise<JobExecutor | undefined> {
    const setup = await setUpExecutor({
      settings: config,
      cards: cards.length,
      nodeId: () => broker.nodeID,
      namespace: () => broker.namespace,
      jobLimits,
      log: logger,
    });
    if ("refusal" in setup) {
      refusal = setup.refusal;
      logger.error(setup.refusal);
      deps.addReadinessCheck("job-isolation", async () => Promise.reject(new Error(setup.refusal)));
      return undefined;
    }
    if (setup.ping) deps.addReadinessCheck("docker", setup.ping);
    return setup.executor;
  }

  /** Reports the job's start and its one outcome, in that order, through the events queue. */
  function track(job: RunningJob): void {
    jobs.set(job.jobId, job);
    const done = (async () => {
      if (await job.started) events.push(jobEventOf(broker.nodeID, job, { type: "started" }));
      const outcome = await job.outcome;
      if (jobs.get(job.jobId) === job) jobs.delete(job.jobId);
      if (outcome) events.push(jobEventOf(broker.nodeID, job, outcome));
      if (outcome) await logs.noteFinished(job.logKey, job.jobId); // a finished log may take the node over its storage cap
    })().catch((err) => logger.error(`Reporting job ${job.jobId} failed`, err));
    tracking.add(done);
    void done.finally(() => tracking.delete(done));
  }

  function sendHeartbeat(): void {
    heartbeats++;
    const heartbeat = heartbeatOf(broker.nodeID, cards, jobs, executor!.kind, heartbeats);
    broker.broadcast(HEARTBEAT_EVENT, heartbeat).catch((err) => logger.warn("Heartbeat not sent", err));
  }

  function beginHeartbeats(): void {
    if (!accepting || heartbeatTimer) return;
    sendHeartbeat();
    heartbeatTimer = setInterval(() => sendHeartbeat(), config.heartbeatS * 1000);
  }

  async function start(): Promise<void> {
    cards = await discoverCards({ nodeId: broker.nodeID, simulate: config.simulate, production: config.production, warn: (m) => logger.warn(m) });
    const chosen = await (deps.executor ?? chooseExecutor)();
    if (!chosen) return; // refused: never accepting, so no heartbeat ever offers its cards
    executor = chosen;
    // On an authenticated bus the stream is the scheduler's to create (a node has no JetStream
    // admin rights; the events queue retries until it exists); on an open bus the node may create it.
    if (!onAuthenticatedBus(broker as never)) await ensureChannelStreams(broker, [JOB_EVENTS_CHANNEL]);
    for (const job of await executor.adopt(cards.map((c) => c.uuid))) {
      logger.info(`Adopted job ${job.jobId} left behind by an earlier run of this node`);
      track(job);
    }
    void logs.prune();
    accepting = true;
    timers.push(
      setInterval(() => void refreshTelemetry(cards, (m) => logger.warn(m)), config.telemetryS * 1000),
      setInterval(() => void logs.prune(), 3600_000),
    );
    if (broker.started) beginHeartbeats(); // created on a running broker: no $broker.started
    const names = cards.map((c) => `${c.name}${c.simulated ? " (simulated)" : ""}`).join(", ");
    logger.info(`gpu-node ready: ${cards.length} card(s) [${names}], ${executor.kind} executor`);
  }

  async function stop(): Promise<void> {
    accepting = false;
    logs.followers.stopAll();
    timers.forEach(clearInterval);
    clearInterval(heartbeatTimer);
    const running = [...jobs.values()];
    if (executor?.jobsOutliveNode) {
      // Let launches in progress settle, so each container is either running (adopted later) or reported.
      await within(Promise.all(running.map((j) => j.started)), FLUSH_ON_STOP_MS);
      for (const job of running) job.detach();
    } else {
      await Promise.all(running.map((j) => j.stop("shutdown")));
    }
    await within(Promise.all([...tracking, executor?.release?.()]), FLUSH_ON_STOP_MS);
    if (!(await events.flush(FLUSH_ON_STOP_MS))) logger.error("Some job events could not be delivered before the node stopped");
    const lost = events.close();
    if (lost.length) logger.error(`Undelivered job events: ${JSON.stringify(lost.map(({ type, jobId }) => ({ type, jobId })))}`);
  }

  function run(params: RunJobParams): { accepted: true } {
    const admission = admitJob({ refusal, accepting, cards, jobs }, params);
    if (admission.kind === "already-running") return { accepted: true };
    if (admission.kind === "refused") {
      if (admission.stopEarlierAttempt) void jobs.get(params.jobId)?.stop("cancel");
      throw admissionError(admission.error);
    }
    // The job as stored, every field of it, goes to the executor; the placement's fields become its cards.
    const { gpuUuid: _card, gpuUuids: _cards, attempt: _attempt, timeoutSeconds, env, ...job } = params;
    const { cards: jobCards, attempt } = admission;
    const timeoutS = timeoutSeconds ?? config.jobTimeoutS;
    const jobEnv = env as Record<string, string> | undefined; // checked by admitJob (jobEnvProblem)
    track(executor!.run({ ...job, card: jobCards[0], cards: jobCards, timeoutS, env: jobEnv, attempt }));
    return { accepted: true };
  }

  async function announce(): Promise<void> {
    const registry = broker.registry as unknown as { discoverer: { sendLocalNodeInfo(): Promise<void> } };
    await registry.discoverer.sendLocalNodeInfo().catch((err) => logger.warn("Node info not sent", err));
    beginHeartbeats();
  }

  const node: GpuNode = {
    config,
    jobs,
    get cards() {
      return cards;
    },
    get executor() {
      return executor;
    },
    events,
    logs,
    start,
    stop,
    run,
    cancel: async (jobId, preempt = false) => {
      const job = jobs.get(jobId);
      return { stopped: job ? await job.stop(preempt ? "preempt" : "cancel") : false };
    },
    chooseExecutor,
    jobLimits,
    announce,
    greetNewNode: () => {
      if (accepting && heartbeatTimer) setTimeout(() => sendHeartbeat(), 0);
    },
  };
  return node;
}
