/**
 * The gpu-scheduler's composition root: its repositories, the Scheduler (placement loop, event
 * applier, housekeeping), the submission batcher, the webhook sender and the housekeeping timer,
 * built once from the broker, the pool and the settings. The service file (gpu-scheduler.service.ts)
 * holds the result as `this.app` and only hands each action, event and channel message to it.
 */
import type { LoggerInstance, Service, ServiceBroker } from "moleculer";
import { promises as dns } from "dns";
import type { Pool } from "pg";
import { channelSender, ensureChannelStreams, ownChannel, sendToChannel } from "../../lib/channels";
import { fromDataError } from "../../lib/errors";
import { checkHeartbeat, checkJobEvent, JOB_EVENTS_CHANNEL } from "../../lib/gpu-protocol";
import { platformSettingsOf } from "../../lib/platform-settings";
import { QuotaGate } from "../../lib/quota-gate";
import { RefusalLog } from "../../lib/refusal-log";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";
import { AccountLimits, UsageAccountLimits } from "./api/account-limits";
import type { Refusal } from "./core/admission";
import { Batcher } from "./loop/batcher";
import { CardVetting, NodeCardPins } from "./loop/card-vetting";
import { nodeLabel } from "./core/cluster-view";
import { HistoryRepository } from "./store/history.repository";
import { IdempotencyRepository } from "./store/idempotency.repository";
import { JobHistory } from "./loop/job-history";
import { JobLogs } from "./streams/job-logs";
import { JobReader } from "./api/job-reader";
import { JobSearchRepository } from "./store/job-search.repository";
import type { NodeLabeler } from "./api/job-view";
import { StatusWatch } from "./streams/job-watch";
import { JobsRepository } from "./store/jobs.repository";
import { submitBatch } from "./store/submit-batch";
import { NewJob } from "./store/job-row";
import { FollowedJobs, LogFollow } from "./streams/log-follow";
import { BrokerNodeClient } from "./loop/node-client";
import { NodesRepository } from "./store/nodes.repository";
import { PlacementRepository } from "./store/placement.repository";
import { SchedulesRepository } from "./store/schedules.repository";
import { ScheduleTicker } from "./loop/schedule-ticker";
import { GrantsRepository } from "./store/grants.repository";
import { brokerPlatformCalls, PlatformGrants } from "./loop/platform-grants";
import { QueuePositions } from "./api/queue-positions";
import { ArraysRepository } from "./store/arrays.repository";
import { DependenciesRepository } from "./store/dependencies.repository";
import { DependencyResolver } from "./loop/dependency-resolver";
import { JobWriter } from "./loop/job-writer";
import { Clock, Scheduler } from "./loop/scheduler";
import type { SchedulerSettings } from "./settings";
import { JobStatusChanged, publishStatusChanges } from "./loop/status-events";
import { UsageOutbox } from "./store/usage-outbox";
import { postOnce } from "./webhooks/webhook-delivery";
import { WebhookSender } from "./webhooks/webhook-sender";
import { Lookup } from "./webhooks/webhook-target";
import { WebhooksRepository } from "./webhooks/webhooks.repository";

/** Deliveries of a job event that fails to apply before the scheduler gives up on it (then: dead letter). */
export const EVENT_MAX_RETRIES = 5;
/** Applying an event takes milliseconds; one unacknowledged this long went to a replica that died. */
export const EVENT_ACK_WAIT_NS = 5e9;
/** A shorter housekeeping period would only load the database. */
const MIN_TICK_MS = 50;
/** Expired idempotency keys removed per housekeeping tick (bounded, so one pass stays short). */
const KEY_PURGE_LIMIT = 1000;

/** Every address of a host, from the system resolver (webhook targets are checked on all of them). */
export const dnsLookup: Lookup = (host) => dns.lookup(host, { all: true });

/** What the scheduler is made of, for the actions (job-submit.ts, job-actions.ts, streams.ts, admin-actions.ts). */
export interface SchedulerApp {
  broker: ServiceBroker;
  config: SchedulerSettings;
  /** What node ids in clients' messages become (opaque labels). */
  labeler: NodeLabeler;
  clock: Clock;
  repo: JobsRepository;
  /** The pool (transactions of submissions that create several jobs: group-submit.ts). */
  db: Pool;
  positions: QueuePositions;
  /** Job arrays and dependencies (issue 30). */
  arrays: ArraysRepository;
  dependencies: DependenciesRepository;
  places: PlacementRepository;
  nodeBook: NodesRepository;
  jobSearch: JobSearchRepository;
  scheduler: Scheduler;
  /** The caller's job and job details (queue positions, waiting reasons). */
  reader: JobReader;
  jobLogs: JobLogs;
  /** A submitted job's queue position, or why it was refused (the queued-jobs limit). */
  inserts: Batcher<NewJob, { position: number } | { refused: Refusal }>;
  /** Idempotency-Key claims of submissions (idempotency.repository.ts). */
  idempotency: IdempotencyRepository;
  limits: AccountLimits;
  gate: QuotaGate;
  usageOutbox: UsageOutbox;
  /** SSE watchers and log followers of this replica waiting for a job's next status change. */
  watch: StatusWatch;
  follow: LogFollow;
  followed: FollowedJobs;
  webhooks: WebhooksRepository;
  /** Cron schedules of jobs (api/schedules.ts; their ticks: loop/schedule-ticker.ts). */
  schedules: SchedulesRepository;
  /** Keys created before this no longer match (GPU_IDEMPOTENCY_TTL_S). */
  keysExpireBefore(): Date;
  /** Any replica's committed change wakes this replica's watchers of that job. */
  onStatusChanged(change: JobStatusChanged | undefined): void;
  /** A gpu-node's heartbeat; `sender`: the broker node the transporter verified. */
  onHeartbeat(payload: unknown, sender: string | null | undefined): Promise<void>;
  /** A job event from the durable channel; throws only on database errors, so JetStream redelivers it later. */
  onJobEvent(payload: unknown, raw?: JobEventDelivery): Promise<void>;
  /** The channel's stream, the housekeeping timer, a first placement pass and the webhook sender. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** How the channel hands over a job event: on NATS its subject names the real sender (in-memory channels carry none). */
export type JobEventDelivery = { subject?: unknown; info?: { redeliveryCount?: number } };

/** The service as its actions see it (the mixins' `this` too). */
export type SchedulerService = Service & { app: SchedulerApp };

export function createSchedulerApp(broker: ServiceBroker, db: Pool, config: SchedulerSettings, logger: LoggerInstance): SchedulerApp {
  const refusals = new RefusalLog((line) => logger.warn(line));
  const { nodeLabelSecret } = config;
  const labeler: NodeLabeler = (nodeId) => nodeLabel(nodeId, nodeLabelSecret);
  const clock: Clock = { now: () => new Date() };
  const repo = new JobsRepository(db, config.fairShareHalfLifeS, (changes) => publishStatusChanges(broker, changes));
  const places = new PlacementRepository(db, config.fairShareHalfLifeS, config.jobTimeoutS);
  const nodeBook = new NodesRepository(db);
  const gate = new QuotaGate(broker, platformSettingsOf(broker).quotaCacheMs, (m) => logger.warn(m));
  const limits = new UsageAccountLimits(gate, config.accountDefaults);
  const positions = new QueuePositions(repo, limits);
  const usageOutbox = new UsageOutbox(db, (batch) => sendToChannel(broker, ownChannel(USAGE_CHANNEL, broker.nodeID), batch));
  const watch = new StatusWatch();
  const followed = new FollowedJobs((id) => repo.followed(id));
  const idempotency = new IdempotencyRepository(db, repo, positions);
  const history = new JobHistory(new HistoryRepository(db), config.history, clock, logger);
  const timeoutMs = config.dispatchTimeoutS * 1000;
  const nodes = new BrokerNodeClient(broker, timeoutMs);
  const grants = new PlatformGrants(new GrantsRepository(db), brokerPlatformCalls(broker), logger);
  const scheduler = new Scheduler(
    repo,
    places,
    nodes,
    clock,
    logger,
    {
      nodeTimeoutMs: config.nodeTimeoutS * 1000,
      dispatchTimeoutMs: timeoutMs,
      warmUpMs: config.heartbeatS * 1500,
      // Every heartbeat of a node keeping its period is reconciled; a faster one's are coalesced.
      reconcileIntervalMs: config.heartbeatS * 500,
      retryBackoffS: config.retryBackoffS,
    },
    limits,
    nodeBook,
    new CardVetting(new NodeCardPins(db), config.nodeCards),
    grants,
  );
  const dependencies = new DependenciesRepository(db);
  const resolver = new DependencyResolver(dependencies, new JobWriter(repo), clock, () => void scheduler.schedule(), logger);
  repo.dependantsDue = (ended) => resolver.ended(ended);
  const reader = new JobReader(repo, positions, scheduler, clock, labeler, config.jobTimeoutS);
  const attemptNode = async (jobId: string, attempt: number) => (await repo.attempt(jobId, attempt))?.node_id ?? null;
  const webhooks = new WebhooksRepository(db);
  const ports = {
    repo: webhooks,
    detail: async (jobId: string) => {
      const row = await repo.find(jobId);
      return row ? reader.detail(row) : null;
    },
    secret: async (clientId: string) => (await broker.call<{ secret: string | null }, { clientId: string }>("auth.webhookSecret", { clientId })).secret,
    lookup: dnsLookup,
    post: postOnce,
    now: () => clock.now(),
  };
  const sender = new WebhookSender(ports, config.webhooks, logger);
  const inserts: SchedulerApp["inserts"] = new Batcher(
    // The queued-jobs limit and the jobs ahead in each account are counted once per batch and account.
    async (jobs) => {
      const limitsNow = await limits.limitsFor([...new Set(jobs.map((j) => j.clientId))]);
      const limitOf = (clientId: string) => limitsNow.get(clientId)!.queuedJobs;
      // One round trip: locks, counts, insert and the accounts' standing (store/submit-batch.ts).
      const { created, refused, accounts } = await submitBatch(db, jobs, clock.now(), limitOf, repo);
      const placed = await positions.ofCreatedAmong(created, accounts);
      // A job placed already (by a pass since) is next: 1.
      return jobs.map((j) => (refused.has(j.id) ? { refused: refused.get(j.id)! } : { position: placed.get(j.id) ?? 1 }));
    },
    // A job PostgreSQL refuses fails alone (400 for a data error), never its batch.
    { maxBatch: 200, maxInFlight: 2, itemError: fromDataError },
  );
  const schedules = new SchedulesRepository(db);
  const ticker = new ScheduleTicker(
    {
      schedules,
      jobs: repo,
      queuedLimit: async (clientId) => (await limits.limitsFor([clientId])).get(clientId)!.queuedJobs,
      cancel: (jobId, reason) => scheduler.cancel({ id: jobId }, reason),
      queued: () => void scheduler.schedule({ newJob: true }),
      clock,
      defaultTimeoutS: config.jobTimeoutS,
    },
    logger,
  );
  const keysExpireBefore = () => new Date(clock.now().getTime() - config.idempotencyTtlS * 1000);
  let tickTimer: NodeJS.Timeout | undefined;

  return {
    broker,
    config,
    labeler,
    clock,
    repo,
    db,
    positions,
    arrays: new ArraysRepository(db),
    dependencies,
    places,
    nodeBook,
    jobSearch: new JobSearchRepository(db),
    scheduler,
    reader,
    jobLogs: new JobLogs(nodes, scheduler.view, (message) => logger.debug(message)),
    inserts,
    idempotency,
    limits,
    gate,
    usageOutbox,
    watch,
    follow: new LogFollow(nodes, scheduler.view, attemptNode, watch),
    followed,
    webhooks,
    schedules,
    keysExpireBefore,

    onStatusChanged(change) {
      if (typeof change?.jobId !== "string") return;
      followed.forget(change.jobId);
      watch.notify(change.jobId);
      if (change.webhook) sender.wake(); // its delivery is queued already (a change without one wakes nothing: no claim per job)
    },

    async onHeartbeat(payload, from) {
      const checked = checkHeartbeat(payload);
      if (!checked.ok) return void refusals.refused("gpu-node heartbeat", from ?? "this process", checked.field);
      const hb = checked.value;
      // The sender is the one the transporter verified: a node speaks only for itself.
      if (hb.nodeId !== from) return void logger.warn(`Ignored a heartbeat for ${hb.nodeId} sent by ${from}`);
      await scheduler.heartbeat(hb).catch((err) => logger.warn(`Heartbeat of ${hb.nodeId} not fully applied: ${err.message}`));
    },

    async onJobEvent(payload, raw) {
      // In-memory channels (one process) carry no subject; on NATS it names the real sender.
      const subject = typeof raw?.subject === "string" ? raw.subject : undefined;
      const from = subject === undefined ? undefined : channelSender(broker.namespace, JOB_EVENTS_CHANNEL, subject);
      const checked = checkJobEvent(payload);
      if (!checked.ok) return void refusals.refused("job event", from ?? subject ?? "this process", checked.field);
      const event = checked.value;
      if (subject !== undefined && from !== event.nodeId)
        return void logger.warn(`Dropped a job event for ${event.nodeId} (job ${event.jobId}) published by ${from ?? subject}`);
      await scheduler.applyEvent(event).catch(async (err) => {
        // On the last delivery the event's job is finished anyway, so its card never stays busy.
        const deliveries = raw?.info?.redeliveryCount ?? 0;
        if (deliveries < EVENT_MAX_RETRIES) throw err;
        await scheduler.giveUpOnEvent(event, err);
      });
    },

    async start() {
      await ensureChannelStreams(broker, [JOB_EVENTS_CHANNEL]);
      const tick = () =>
        Promise.all([
          scheduler.tick(),
          idempotency.removeExpired(keysExpireBefore(), KEY_PURGE_LIMIT),
          usageOutbox.drain(),
          history.run(),
          // Credentials of job attempts that ended (also after a restart, on any replica).
          grants.sweep(),
          // Due schedules make their jobs (a tick missed while no replica ran: once, now).
          ticker.tick(),
          // Waiting jobs whose dependencies were decided unseen (a crash, a race with their submission).
          resolver.sweep(),
        ]).catch((err) => logger.warn(`Scheduler housekeeping failed: ${(err as Error).message}`));
      tickTimer = setInterval(() => void tick(), Math.max(MIN_TICK_MS, config.scheduleTickMs));
      void scheduler.schedule();
      sender.start();
    },

    async stop() {
      clearInterval(tickTimer);
      await sender.stop();
      await scheduler.stop();
    },
  };
}
