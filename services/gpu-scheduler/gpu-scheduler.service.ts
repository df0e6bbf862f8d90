/**
 * gpu-scheduler: the GPU job API, the durable queue (PostgreSQL) and placement of queued jobs on
 * free cards of the gpu-nodes that announce themselves by heartbeat. Job events come back over the
 * durable JetStream channel, so a report sent while the scheduler restarts is applied later.
 * Several replicas may run: placement is serialised by a PostgreSQL advisory lock and a card
 * can hold one job (unique index); events are applied with compare-and-set.
 */
import { randomUUID } from "crypto";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { channelSender, ensureChannelStreams, ownChannel, perSenderChannel, sendToChannel } from "../../lib/channels";
import { USAGE_CHANNEL, UsageRecord } from "../../lib/usage-protocol";
import { Type } from "../../lib/contract";
import { brokerEnv } from "../../lib/settings";
import { apiError, fromDataError, notFound, validationFailed } from "../../lib/errors";
import { checkHeartbeat, checkJobEvent, HEARTBEAT_EVENT, JOB_EVENTS_CHANNEL, jobEnvProblem, MAX_JOB_RETRIES, MAX_JOB_SECONDS } from "../../lib/gpu-protocol";
import { CallerMeta, respondCreated } from "../../lib/identity";
import type { BodyPage, PagedBodyMeta } from "../../lib/paged-body";
import { RefusalLog } from "../../lib/refusal-log";
import { isUuid } from "../../lib/uuid";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { transaction } from "../../lib/db";
import type { Refusal } from "./admission";
import { Batcher } from "./batcher";
import { ClusterStatus, CreatedJob, Job, JobCreated, JobDetail, JobList } from "./contract";
import { NodeLabeler, toClusterStatus, toJobDetail } from "./job-view";
import { nodeLabel } from "./cluster-view";
import { parseSchedulerSettings, SchedulerSettings } from "./settings";
import { AccountState, JobRow, JobsRepository, NewJob } from "./jobs.repository";
import { UsageOutbox } from "./usage-outbox";
import { PlacementRepository } from "./placement.repository";
import { NodesRepository } from "./nodes.repository";
import { CardVetting, NodeCardPins } from "./card-vetting";
import { JobSearchRepository } from "./job-search.repository";
import { AdminActionsMixin } from "./admin-actions";
import { migrations } from "./migrations";
import { earlierAttempt, JobLogs, lastAttempt, LogCursor, LogTarget } from "./job-logs";
import { BrokerNodeClient } from "./node-client";
import { matchingNames, requestedGpuType } from "./gpu-type";
import { checkImage, IMAGE_NAME_MAX, IMAGE_NAME_PATTERN } from "../gpu-node/registry-policy";
import { Clock, Scheduler } from "./scheduler";
import { checkIdempotencyKey, IDEMPOTENCY_HEADER, requestHash } from "./idempotency";
import { IdempotencyRepository } from "./idempotency.repository";
import { heldCardCounts, SchedulerStats } from "./stats";
import { AccountLimits, GPU_MONTHLY, UsageAccountLimits } from "./account-limits";
import { QuotaGate } from "../../lib/quota-gate";
import { platformSettingsOf } from "../../lib/platform-settings";
import type { QuotaResource } from "../../lib/usage-protocol";
import { PRIORITIES, type Priority, storedJob } from "../../lib/job-spec";
import { QueuePositions } from "./queue-positions";
import { JOB_STATUS_CHANGED } from "../../lib/event-names";
import { JobStatusChanged, publishStatusChanges } from "./status-events";
import { EventsCursor, nextEventsPage, statusEventPage, StatusWatch } from "./job-watch";
import { FollowCursor, FollowedJob, FollowedJobs, LogFollow } from "./log-follow";
import { isTerminal } from "./transitions";
import { promises as dns } from "dns";
import { Lookup, resolveTarget, WEBHOOK_URL_MAX } from "./webhook-target";
import { postOnce } from "./webhook-delivery";
import { WebhookSender } from "./webhook-sender";
import { WebhooksRepository } from "./webhooks.repository";
import { WebhookDeliveryList, WebhookDeliveryView } from "./contract";
import { HistoryRepository } from "./history.repository";
import { JobHistory } from "./job-history";

export interface CreateJobParams {
  command: string;
  gpuType?: string | null;
  containerImage?: string | null;
  timeoutSeconds?: number;
  env?: Record<string, string>;
  queueTimeoutSeconds?: number;
  maxRetries?: number;
  priority?: Priority;
  gpuCount?: number;
  webhookUrl?: string;
}
export type JobIdParams = { id: string };
/** `attempt`: 1-based; absent: the last one. */
export type JobLogsParams = JobIdParams & { attempt?: number; follow?: boolean };

type PagedMeta = CallerMeta & PagedBodyMeta & { $responseType?: string };

/** A streamed answer: its first page now, the next ones from `action` as the client reads (lib/paged-body.ts). */
function pagedAnswer(ctx: Context<unknown, PagedMeta>, first: BodyPage, contentType: string, action = "gpu-scheduler.logsPage", stop?: string): BodyPage {
  ctx.meta.$responseType = contentType;
  ctx.meta.$pagedBody = { action, ...(stop && { stop }) };
  return first;
}

/** Every address of a host, from the system resolver (webhook targets are checked on all of them). */
const dnsLookup: Lookup = (host) => dns.lookup(host, { all: true });

/** What following needs of a job's row (log-follow.ts). */
const followedJob = (row: JobRow): FollowedJob => ({ id: row.id, status: row.status, attempts: row.attempts, nodeId: row.node_id });

const LIST_LIMIT = 50;
/** The most cards one job may ask for (`gpuCount`). */
const MAX_GPU_COUNT = 16;
const JOB_ID_PARAMS = { id: { type: "string", max: 64 } };
const ATTEMPT_PARAM = { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_RETRIES + 1, convert: true };
const FOLLOW_CURSOR = {
  $$strict: "remove",
  id: { type: "string", max: 64 },
  fid: { type: "uuid" },
  attempt: { ...ATTEMPT_PARAM, optional: false },
  offset: { type: "number", integer: true, min: 0 },
} as const;
/** Deliveries of a job event that fails to apply before the scheduler gives up on it (then: dead letter). */
const EVENT_MAX_RETRIES = 5;
/** Applying an event takes milliseconds; one unacknowledged this long went to a replica that died. */
const EVENT_ACK_WAIT_NS = 5e9;
/** A shorter housekeeping period would only load the database. */
const MIN_TICK_MS = 50;
/** Expired idempotency keys removed per housekeeping tick (bounded, so one pass stays short). */
const KEY_PURGE_LIMIT = 1000;

export type SchedulerThis = Service &
  DbThis & {
    config: SchedulerSettings;
    labeler: NodeLabeler;
    clock: Clock;
    repo: JobsRepository;
    places: PlacementRepository;
    scheduler: Scheduler;
    jobLogs: JobLogs;
    /** Warns about malformed heartbeats and job events, a few lines per sender. */
    refusals: RefusalLog;
    /** GPU_ALLOWED_REGISTRIES, parsed once at start. */
    allowedRegistries: string[];
    /** A submitted job's queue position, or why it was refused (the queued-jobs limit). */
    inserts: Batcher<NewJob, { position: number } | { refused: Refusal }>;
    limits: AccountLimits;
    gate: QuotaGate;
    positions: QueuePositions;
    usageOutbox: UsageOutbox;
    detail(row: JobRow, positions?: Map<string, number>, label?: NodeLabeler): JobDetail;
    details(rows: JobRow[], label?: NodeLabeler): Promise<JobDetail[]>;
    nodeBook: NodesRepository;
    jobSearch: JobSearchRepository;
    /** SSE watchers and log followers of this replica waiting for a job's next status change. */
    watch: StatusWatch;
    follow: LogFollow;
    followed: FollowedJobs;
    /** The caller's followed job (cached a second, followed-jobs); another account's is 404. */
    ownFollowed(ctx: Context<FollowCursor, CallerMeta>): Promise<FollowedJob>;
    webhooks: WebhooksRepository;
    sender: WebhookSender;
    checkWebhookUrl(clientId: string, url: string): Promise<void>;
    quotaExceeded(refusal: Refusal): Error;
    checkMonthly(clientId: string): Promise<void>;
    keys: IdempotencyRepository;
    history: JobHistory;
    tickTimer?: NodeJS.Timeout;
    ownJob(ctx: Context<JobIdParams, CallerMeta>): Promise<JobRow>;
    logTarget(ctx: Context<JobLogsParams, CallerMeta>): Promise<LogTarget>;
    checkGpuType(gpuType: string): void;
    checkGpuCount(gpuCount: number, gpuType: string | null, clientId: string): Promise<void>;
    createKeyed(ctx: Context<CreateJobParams, CallerMeta>, key: string, job: NewJob): Promise<CreatedJob>;
    keysExpireBefore(): Date;
  };

/** A durable channel subscription (@moleculer/channels reads `channels` from the schema). */
type ChannelDef = {
  group: string;
  maxInFlight: number;
  maxRetries?: number;
  nats?: { consumerOptions: { config: Record<string, unknown> } };
  handler(this: SchedulerThis, payload: unknown): Promise<void>;
};

const GpuSchedulerService: ServiceSchema<ServiceSettingSchema, SchedulerThis> & { channels: Record<string, ChannelDef> } = {
  name: "gpu-scheduler",
  // Every replica serves SSE watchers and follows of any job (job-watch.ts), hence a broadcast.
  emits: [{ event: JOB_STATUS_CHANGED, kind: "broadcast" }],
  publishes: [USAGE_CHANNEL],
  // The operators' actions (admin-actions.ts) live beside the clients' in their own module.
  mixins: [DbMixin({ schema: "gpu_scheduler", migrations, poolSize: 20 }), AdminActionsMixin],

  settings: {
    rest: "/gpu",
  },

  actions: {
    create: {
      rest: "POST /jobs",
      auth: "required",
      openapi: {
        tag: "gpu",
        summary: "Submit a GPU job",
        description:
          "A gpuType matching no card of the cluster is 400, with the known types in details. " +
          "A gpuCount larger than the most cards of one (matching) type on any node, or than the account's running-GPU limit, is 400. " +
          `Optional request header \`${IDEMPOTENCY_HEADER}\` (1 to 255 visible ASCII characters, kept 24 hours per account): ` +
          "the same key with the same body answers the first response again (201, same body and Location) with header " +
          "`Idempotent-Replayed: true` and creates nothing; with a different body it is 422 IDEMPOTENCY_KEY_REUSED; " +
          "concurrent requests with one key create one job. A malformed key is 400 naming the header.",
        status: 201,
        response: JobCreated,
        errors: ["IDEMPOTENCY_KEY_REUSED", "QUOTA_EXCEEDED"],
      },
      params: {
        $$strict: "remove",
        command: { type: "string", min: 1, max: 64 * 1024 },
        gpuType: { type: "string", optional: true, trim: true, min: 1, max: 200 },
        containerImage: { type: "string", optional: true, min: 1, max: IMAGE_NAME_MAX, pattern: IMAGE_NAME_PATTERN },
        timeoutSeconds: { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_SECONDS },
        queueTimeoutSeconds: { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_SECONDS },
        maxRetries: { type: "number", optional: true, integer: true, min: 0, max: MAX_JOB_RETRIES },
        // Names and values are checked by jobEnvProblem (one rule for the scheduler and the node).
        env: { type: "object", optional: true },
        priority: { type: "enum", values: [...PRIORITIES], optional: true },
        gpuCount: { type: "number", optional: true, integer: true, min: 1, max: MAX_GPU_COUNT },
        webhookUrl: { type: "string", optional: true, max: WEBHOOK_URL_MAX },
      },
      async handler(this: SchedulerThis, ctx: Context<CreateJobParams, CallerMeta>): Promise<CreatedJob> {
        const { command, containerImage } = ctx.params;
        const key = checkIdempotencyKey(ctx.meta.idempotencyKey);
        if (!/\S/.test(command)) throw validationFailed([{ field: "command", message: "The 'command' field must not be blank." }]);
        const env = ctx.params.env ?? {};
        const envProblem = jobEnvProblem(env);
        if (envProblem) throw validationFailed([{ field: "env", message: envProblem }]);
        const gpuType = requestedGpuType(ctx.params.gpuType);
        if (gpuType) this.checkGpuType(gpuType);
        const gpuCount = ctx.params.gpuCount ?? 1;
        if (gpuCount > 1) await this.checkGpuCount(gpuCount, gpuType, ctx.meta.caller!.clientId);
        // Pulling makes a GPU host connect to the image's registry: only the operator's registries (the node checks again).
        const image = containerImage ? checkImage(containerImage, this.allowedRegistries) : null;
        if (image && !image.ok) throw validationFailed([{ field: "containerImage", message: `The 'containerImage' field is not allowed: ${image.reason}.` }]);
        if (ctx.params.webhookUrl !== undefined) await this.checkWebhookUrl(ctx.meta.caller!.clientId, ctx.params.webhookUrl);
        const job: NewJob = { id: randomUUID(), clientId: ctx.meta.caller!.clientId, spec: storedJob(ctx.params, this.config.jobTimeoutS), env };
        // Keyed requests take their own transaction (a replay answers even at the queued-jobs cap); the others stay on the batched inserts.
        if (key !== undefined) return this.createKeyed(ctx, key, job);
        // At or over a monthly quota a job uses up: 403 before anything is queued (a keyed replay still gets its first answer).
        await this.checkMonthly(job.clientId);
        const outcome = await this.inserts.push(job);
        if ("refused" in outcome) throw this.quotaExceeded(outcome.refused);
        void this.scheduler.schedule({ newJob: true });
        respondCreated(ctx.meta, `/api/gpu/jobs/${job.id}`);
        return { id: job.id, status: "queued", queuePosition: outcome.position };
      },
    },

    list: {
      rest: "GET /jobs",
      auth: "required",
      openapi: { tag: "gpu", summary: "The caller's 50 most recent jobs, newest first", status: 200, response: JobList },
      async handler(this: SchedulerThis, ctx: Context<unknown, CallerMeta>): Promise<{ jobs: JobDetail[] }> {
        const rows = await this.repo.listForClient(ctx.meta.caller!.clientId, LIST_LIMIT);
        return { jobs: await this.details(rows) };
      },
    },

    get: {
      rest: "GET /jobs/:id",
      auth: "required",
      openapi: { tag: "gpu", summary: "One job", status: 200, response: Job, errors: ["NOT_FOUND"] },
      params: JOB_ID_PARAMS,
      async handler(this: SchedulerThis, ctx: Context<JobIdParams, CallerMeta>): Promise<JobDetail> {
        return (await this.details([await this.ownJob(ctx)]))[0];
      },
    },

    /** Queued and running jobs are cancelled at once; a running one is stopped on its node first. */
    cancel: {
      rest: "POST /jobs/:id/cancel",
      auth: "required",
      openapi: { tag: "gpu", summary: "Cancel a queued or running job", status: 200, response: Job, errors: ["NOT_FOUND", "INVALID_STATE"] },
      params: JOB_ID_PARAMS,
      async handler(this: SchedulerThis, ctx: Context<JobIdParams, CallerMeta>): Promise<JobDetail> {
        const row = await this.ownJob(ctx);
        if (!(await this.scheduler.cancel(row))) throw apiError("INVALID_STATE", `GPU job already finished (${row.status}); it cannot be cancelled`);
        return this.detail((await this.repo.find(row.id))!);
      },
    },

    /**
     * The job's whole output, exactly the bytes it printed, streamed: this answers the first page
     * and the gateway asks `logsPage` for the next ones as the client reads (lib/paged-body.ts).
     */
    logs: {
      rest: "GET /jobs/:id/logs",
      streams: true,
      auth: "required",
      openapi: {
        tag: "gpu",
        summary: "The job's whole captured output: the exact bytes it printed, streamed (chunked)",
        description:
          "Of its last attempt; `?attempt=N` (1-based) reads an earlier one. An attempt the job has not started is 404. " +
          "`?follow=true`: what exists, then new output as it is produced (a queued job's follow waits for it to start; " +
          "a retried job's next attempts follow), ending once the job has ended and all its output is sent.",
        status: 200,
        response: Type.String(),
        contentType: "text/plain",
        errors: ["NOT_FOUND"],
      },
      params: { ...JOB_ID_PARAMS, attempt: ATTEMPT_PARAM, follow: { type: "boolean", optional: true, convert: true } },
      async handler(this: SchedulerThis, ctx: Context<JobLogsParams, PagedMeta>): Promise<BodyPage> {
        const row = ctx.params.follow ? await this.ownJob(ctx) : undefined;
        // A finished job has nothing more to follow: its whole output, as without `follow`.
        if (!row || isTerminal(row.status)) return pagedAnswer(ctx, await this.jobLogs.first(await this.logTarget(ctx)), "text/plain; charset=utf-8");
        const attempt = ctx.params.attempt ?? Math.max(row.attempts, 1);
        if (attempt > Math.max(row.attempts, 1)) throw notFound(`Attempt ${attempt} of the GPU job`);
        const cursor: FollowCursor = { id: row.id, fid: randomUUID(), attempt, offset: 0 };
        ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, "Cache-Control": "no-cache", "X-Accel-Buffering": "no" };
        const first = await this.follow.page(followedJob(row), cursor, 0);
        return pagedAnswer(ctx, first, "text/plain; charset=utf-8", "gpu-scheduler.followPage", "gpu-scheduler.followStop");
      },
    },

    /** The next page of a followed log: new output, waiting up to GPU_FOLLOW_WAIT_MS for some (log-follow.ts). */
    followPage: {
      visibility: "public",
      callers: ["api-gateway"],
      auth: "required",
      params: FOLLOW_CURSOR,
      async handler(this: SchedulerThis, ctx: Context<FollowCursor, CallerMeta>): Promise<BodyPage> {
        return this.follow.page(await this.ownFollowed(ctx), ctx.params, this.config.followWaitMs);
      },
    },

    /** The client of a followed log left: the node ends the page wait in flight at once. */
    followStop: {
      visibility: "public",
      callers: ["api-gateway"],
      auth: "required",
      params: FOLLOW_CURSOR,
      async handler(this: SchedulerThis, ctx: Context<FollowCursor, CallerMeta>): Promise<{ stopped: true }> {
        await this.follow.stop(await this.ownFollowed(ctx), ctx.params);
        return { stopped: true };
      },
    },

    /**
     * What the job left under /out, as a tar streamed like `logs` (the node keeps it as long as
     * the job's log); 404 while there is none: the job has not ended, left nothing, or its node has left.
     */
    artifacts: {
      rest: "GET /jobs/:id/artifacts",
      streams: true,
      auth: "required",
      openapi: {
        tag: "gpu",
        summary: "The files the job left under /out, as a tar (streamed, chunked); 404 while there are none",
        status: 200,
        response: Type.String({ format: "binary" }),
        contentType: "application/x-tar",
        errors: ["NOT_FOUND"],
      },
      params: JOB_ID_PARAMS,
      async handler(this: SchedulerThis, ctx: Context<JobIdParams, PagedMeta>): Promise<BodyPage> {
        const page = await this.jobLogs.firstArtifacts(lastAttempt(await this.ownJob(ctx)));
        if (!page) throw apiError("NOT_FOUND", "The GPU job has no artifacts (yet): files it leaves under /out are kept when it ends");
        return pagedAnswer(ctx, page, "application/x-tar");
      },
    },

    /** The next page of a `logs` or `artifacts` answer; the same caller, so another account's job is the same 404. */
    logsPage: {
      visibility: "public",
      callers: ["api-gateway"], // the gateway fetches the pages as its client reads
      auth: "required",
      params: {
        $$strict: "remove",
        id: { type: "string", max: 64 },
        attempt: ATTEMPT_PARAM,
        source: { type: "enum", values: ["node", "result", "artifacts"] },
        offset: { type: "number", integer: true, min: 0 },
      },
      async handler(this: SchedulerThis, ctx: Context<LogCursor, CallerMeta>): Promise<BodyPage> {
        return this.jobLogs.page(await this.logTarget(ctx), ctx.params.source, ctx.params.offset);
      },
    },

    /** Server-sent events: the job's detail now, then at each status change; ends after a terminal one (job-watch.ts). */
    events: {
      rest: "GET /jobs/:id/events",
      streams: true,
      auth: "required",
      openapi: {
        tag: "gpu",
        summary: "The job's status as server-sent events: its detail now, then one `status` event per change; ends after a terminal status",
        description: "Each event is `event: status` with `data: <job detail>`; a `: keep-alive` comment every 15 s (GPU_EVENTS_KEEPALIVE_MS) keeps it open.",
        status: 200,
        response: Type.String(),
        contentType: "text/event-stream",
        errors: ["NOT_FOUND"],
      },
      params: JOB_ID_PARAMS,
      async handler(this: SchedulerThis, ctx: Context<JobIdParams, PagedMeta>): Promise<BodyPage> {
        const first = statusEventPage((await this.details([await this.ownJob(ctx)]))[0]);
        ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, "Cache-Control": "no-cache", "X-Accel-Buffering": "no" };
        return pagedAnswer(ctx, first, "text/event-stream; charset=utf-8", "gpu-scheduler.eventsPage");
      },
    },

    /** The next event of an `events` stream (or a keep-alive after GPU_EVENTS_KEEPALIVE_MS); the same caller's job only. */
    eventsPage: {
      visibility: "public",
      callers: ["api-gateway"],
      auth: "required",
      params: { $$strict: "remove", id: { type: "string", max: 64 }, last: { type: "string", max: 32 } },
      async handler(this: SchedulerThis, ctx: Context<EventsCursor, CallerMeta>): Promise<BodyPage> {
        const read = async () => (await this.details([await this.ownJob(ctx)]))[0];
        return nextEventsPage(ctx.params, read, this.watch, this.config.eventsKeepAliveMs);
      },
    },

    /** The account's webhook deliveries, newest first (webhook-sender.ts). */
    deliveries: {
      rest: { method: "GET", basePath: "/webhooks", path: "/deliveries" },
      auth: "required",
      openapi: { tag: "gpu", summary: "The account's 100 most recent webhook deliveries, newest first", status: 200, response: WebhookDeliveryList },
      async handler(this: SchedulerThis, ctx: Context<unknown, CallerMeta>): Promise<{ deliveries: WebhookDeliveryView[] }> {
        return { deliveries: await this.webhooks.listForClient(ctx.meta.caller!.clientId, 100) };
      },
    },

    status: {
      rest: "GET /status",
      auth: "required",
      openapi: { tag: "gpu", summary: "Cluster status: GPUs and queue depth", status: 200, response: ClusterStatus },
      async handler(this: SchedulerThis): Promise<ClusterStatus> {
        const [held, depth, drained] = await Promise.all([this.places.heldCards(), this.repo.queueDepth(), this.nodeBook.drained()]);
        return toClusterStatus(this.scheduler.view.cards(), held, depth, this.labeler, drained);
      },
    },

    /** Internal: what each account holds and has queued now, for its usage and quotas. */
    accountState: {
      visibility: "public",
      callers: ["usage"],
      params: { clientIds: { type: "array", items: "uuid", min: 1, max: 1000 } },
      /** With each account's ended attempts still in the usage outbox (`pending`): the ledger does not have them yet. */
      async handler(this: SchedulerThis, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, AccountState & { pending: UsageRecord[] }>> {
        const [states, pending] = await Promise.all([this.repo.accountState(ctx.params.clientIds), this.usageOutbox.pendingOf(ctx.params.clientIds)]);
        const out: Record<string, AccountState & { pending: UsageRecord[] }> = {};
        for (const [id, state] of Object.entries(states)) out[id] = { ...state, pending: [] };
        for (const r of pending) (out[r.clientId] ??= { heldGpus: 0, queuedJobs: 0, running: [], pending: [] }).pending.push(r);
        return out;
      },
    },

    /** Internal: figures for the metrics service. */
    stats: {
      visibility: "public",
      callers: ["metrics"],
      async handler(this: SchedulerThis): Promise<SchedulerStats> {
        const c = await this.repo.countByStatus();
        const queued = c.queued + c.assigned;
        return {
          queueDepth: queued,
          jobsByStatus: { queued, running: c.running, completed: c.completed, failed: c.failed, cancelled: c.cancelled },
          ...heldCardCounts(this.scheduler.view.nodeEntries()),
        };
      },
    },
  },

  events: {
    /** Any replica's committed change wakes this replica's watchers of that job. */
    [JOB_STATUS_CHANGED]: {
      handler(this: SchedulerThis, ctx: Context<JobStatusChanged>) {
        if (typeof ctx.params?.jobId !== "string") return;
        this.followed.forget(ctx.params.jobId);
        this.watch.notify(ctx.params.jobId);
        if (isTerminal(ctx.params.status)) this.sender.wake(); // its webhook, if any, is queued already
      },
    },
    [HEARTBEAT_EVENT]: {
      async handler(this: SchedulerThis, ctx: Context<unknown>) {
        const checked = checkHeartbeat(ctx.params);
        if (!checked.ok) return void this.refusals.refused("gpu-node heartbeat", ctx.nodeID ?? "this process", checked.field);
        const hb = checked.value;
        // ctx.nodeID is the sender the transporter verified: a node speaks only for itself.
        if (hb.nodeId !== ctx.nodeID) return void this.logger.warn(`Ignored a heartbeat for ${hb.nodeId} sent by ${ctx.nodeID}`);
        await this.scheduler.heartbeat(hb).catch((err) => this.logger.warn(`Heartbeat of ${hb.nodeId} not fully applied: ${err.message}`));
      },
    },
  },

  channels: {
    // Each node publishes on `<channel>.<its node id>` (the only subject its credential allows).
    [perSenderChannel(JOB_EVENTS_CHANNEL)]: {
      group: "gpu-scheduler",
      maxInFlight: 64,
      maxRetries: EVENT_MAX_RETRIES,
      // Events handed to a replica that died unacknowledged go to another one after 5 s, not 30 s.
      nats: { consumerOptions: { config: { ack_wait: EVENT_ACK_WAIT_NS } } },
      /** Throws only on database errors, so JetStream redelivers the event later. */
      async handler(this: SchedulerThis, payload: unknown, raw?: { subject?: unknown }) {
        // In-memory channels (one process) carry no subject; on NATS it names the real sender.
        const subject = typeof raw?.subject === "string" ? raw.subject : undefined;
        const sender = subject === undefined ? undefined : channelSender(this.broker.namespace, JOB_EVENTS_CHANNEL, subject);
        const checked = checkJobEvent(payload);
        if (!checked.ok) return void this.refusals.refused("job event", sender ?? subject ?? "this process", checked.field);
        const event = checked.value;
        if (subject !== undefined && sender !== event.nodeId)
          return void this.logger.warn(`Dropped a job event for ${event.nodeId} (job ${event.jobId}) published by ${sender ?? subject}`);
        await this.scheduler.applyEvent(event).catch(async (err) => {
          // On the last delivery the event's job is finished anyway, so its card never stays busy.
          const deliveries = (raw as { info?: { redeliveryCount?: number } } | undefined)?.info?.redeliveryCount ?? 0;
          if (deliveries < EVENT_MAX_RETRIES) throw err;
          await this.scheduler.giveUpOnEvent(event, err);
        });
      },
    },
  },

  methods: {
    /** `label`: what node ids in messages become (clients: the opaque labels). */
    detail(this: SchedulerThis, row: JobRow, positions?: Map<string, number>, label = this.labeler): JobDetail {
      const waiting = row.status === "queued" ? this.scheduler.waitingFor(row.id, row.gpu_type, row.gpu_count) : undefined;
      const queued = { queuePosition: positions?.get(row.id), waiting };
      return toJobDetail(row, this.clock.now(), label, this.config.jobTimeoutS, queued);
    },

    /** Details of `rows`, with the queue positions of the queued ones (queue-positions.ts). */
    async details(this: SchedulerThis, rows: JobRow[], label?: NodeLabeler): Promise<JobDetail[]> {
      const positions = await this.positions.of(rows.filter((r) => r.status === "queued").map((r) => r.id));
      return rows.map((r) => this.detail(r, positions, label));
    },

    /** 403 QUOTA_EXCEEDED when the account is at or over a monthly quota a job uses up (credits, GPU-seconds). */
    async checkMonthly(this: SchedulerThis, clientId: string): Promise<void> {
      await this.gate.check(clientId, GPU_MONTHLY as QuotaResource[]);
    },

    /** 403 QUOTA_EXCEEDED: the account already has its limit of queued jobs (admission.ts). */
    quotaExceeded(this: SchedulerThis, { limit, used }: Refusal): Error {
      return apiError("QUOTA_EXCEEDED", `An account may have at most ${limit} queued GPU jobs`, { resource: "queuedJobs", limit, used });
    },

    /** The caller's job; another account's, or a malformed id, is the same 404. */
    async ownJob(this: SchedulerThis, ctx: Context<JobIdParams, CallerMeta>): Promise<JobRow> {
      const row = isUuid(ctx.params.id) ? await this.repo.findForClient(ctx.params.id, ctx.meta.caller!.clientId) : undefined;
      if (!row) throw notFound("GPU job");
      return row;
    },

    async ownFollowed(this: SchedulerThis, ctx: Context<FollowCursor, CallerMeta>): Promise<FollowedJob> {
      const job = isUuid(ctx.params.id) ? await this.followed.get(ctx.params.id, ctx.meta.caller!.clientId) : undefined;
      if (!job) throw notFound("GPU job");
      return job;
    },

    /** Whose log `?attempt=N` reads: the last attempt is the job's row, an earlier one its kept record; one not started is 404. */
    async logTarget(this: SchedulerThis, ctx: Context<JobLogsParams, CallerMeta>): Promise<LogTarget> {
      const row = await this.ownJob(ctx);
      const attempt = ctx.params.attempt;
      if (attempt === undefined || attempt === row.attempts) return lastAttempt(row, attempt);
      const kept = attempt < row.attempts ? await this.repo.attempt(row.id, attempt) : undefined;
      if (!kept) throw notFound(`Attempt ${attempt} of the GPU job`);
      return earlierAttempt(row.id, kept);
    },

    /** A submission with an Idempotency-Key: the job and the key in one transaction, or the first answer again. */
    async createKeyed(this: SchedulerThis, ctx: Context<CreateJobParams, CallerMeta>, key: string, job: NewJob): Promise<CreatedJob> {
      const request = { clientId: job.clientId, key, requestHash: requestHash(ctx.params) };
      const limit = (await this.limits.limitsFor([job.clientId])).get(job.clientId)!.queuedJobs;
      const refused = (refusal: Refusal) => this.quotaExceeded(refusal);
      const mayCreate = () => this.checkMonthly(job.clientId);
      const outcome = await this.keys.createOnce(request, job, this.clock.now(), this.keysExpireBefore(), limit, refused, mayCreate).catch((err) => {
        throw fromDataError(err);
      });
      if (outcome.kind === "reused") throw apiError("IDEMPOTENCY_KEY_REUSED", `This ${IDEMPOTENCY_HEADER} was already used with a different request body`);
      if (outcome.kind === "created") void this.scheduler.schedule({ newJob: true });
      else ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, "Idempotent-Replayed": "true" };
      respondCreated(ctx.meta, `/api/gpu/jobs/${outcome.body.id}`);
      ctx.meta.$statusCode = outcome.status;
      return outcome.body;
    },

    /** Keys created before this no longer match (GPU_IDEMPOTENCY_TTL_S). */
    keysExpireBefore(this: SchedulerThis): Date {
      return new Date(this.clock.now().getTime() - this.config.idempotencyTtlS * 1000);
    },

    /**
     * A count no node can hold (once the cluster is known: as checkGpuType), or more than the
     * account may ever hold at once, would wait forever: 400.
     */
    async checkGpuCount(this: SchedulerThis, gpuCount: number, gpuType: string | null, clientId: string) {
      const known = this.scheduler.view.cardNames().length > 0 && !this.scheduler.warmingUp();
      const most = known ? this.scheduler.view.mostCardsOnOneNode(gpuType) : gpuCount;
      if (gpuCount > most) {
        const matching = gpuType ? ` matching "${gpuType}"` : "";
        const message = `No GPU node has ${gpuCount} GPUs${matching} of one type; the most on one node is ${most}.`;
        throw validationFailed([{ field: "gpuCount", message }]);
      }
      const { runningGpus } = (await this.limits.limitsFor([clientId])).get(clientId)!;
      if (runningGpus !== null && gpuCount > runningGpus)
        throw validationFailed([
          { field: "gpuCount", message: `The 'gpuCount' field (${gpuCount}) exceeds this account's limit of ${runningGpus} running GPUs.` },
        ]);
    },

    /** 400 naming `webhookUrl`: not an absolute http(s) URL, the account has no secret, or (unless WEBHOOK_ALLOW_PRIVATE) a private target. */
    async checkWebhookUrl(this: SchedulerThis, clientId: string, url: string): Promise<void> {
      const refuse = (message: string) => validationFailed([{ field: "webhookUrl", message }]);
      const { secret } = await this.broker.call<{ secret: string | null }, { clientId: string }>("auth.webhookSecret", { clientId });
      const target = await resolveTarget(url, dnsLookup, this.config.webhooks.allowPrivate);
      if (!target.ok) throw refuse(`The 'webhookUrl' field ${target.reason}.`);
      if (!secret) throw refuse("The account has no webhook signing secret: create one with POST /api/auth/webhook-secret first.");
    },

    checkGpuType(this: SchedulerThis, gpuType: string) {
      const names = this.scheduler.view.cardNames();
      // An empty or just-restarted view does not know every card yet: the job waits for one.
      if (!names.length || this.scheduler.warmingUp() || matchingNames(names, gpuType).length) return;
      throw validationFailed([
        {
          field: "gpuType",
          message: `No GPU in the cluster matches "${gpuType}". Known types: ${names.join(", ")}`,
          knownTypes: names,
        } as { field: string; message: string },
      ]);
    },
  },

  created(this: SchedulerThis) {
    this.refusals = new RefusalLog((line) => this.logger.warn(line));
    this.config = parseSchedulerSettings(brokerEnv(this.broker));
    const { nodeLabelSecret } = this.config;
    this.labeler = (nodeId) => nodeLabel(nodeId, nodeLabelSecret);
    this.allowedRegistries = this.config.allowedRegistries;
    this.clock = { now: () => new Date() };
    this.repo = new JobsRepository(this.db, this.config.fairShareHalfLifeS, (changes) => publishStatusChanges(this.broker, changes));
    this.places = new PlacementRepository(this.db, this.config.fairShareHalfLifeS, this.config.jobTimeoutS);
    this.nodeBook = new NodesRepository(this.db);
    this.jobSearch = new JobSearchRepository(this.db);
    this.gate = new QuotaGate(this.broker, platformSettingsOf(this.broker).quotaCacheMs, (m) => this.logger.warn(m));
    this.limits = new UsageAccountLimits(this.gate, this.config.accountDefaults);
    this.positions = new QueuePositions(this.repo, this.limits);
    this.usageOutbox = new UsageOutbox(this.db, (batch) => sendToChannel(this.broker, ownChannel(USAGE_CHANNEL, this.broker.nodeID), batch));
    this.watch = new StatusWatch();
    this.keys = new IdempotencyRepository(this.db, this.repo, this.positions);
    this.history = new JobHistory(new HistoryRepository(this.db), this.config.history, this.clock, this.logger);
    const timeoutMs = this.config.dispatchTimeoutS * 1000;
    const nodes = new BrokerNodeClient(this.broker, timeoutMs);
    this.scheduler = new Scheduler(
      this.repo,
      this.places,
      nodes,
      this.clock,
      this.logger,
      {
        nodeTimeoutMs: this.config.nodeTimeoutS * 1000,
        dispatchTimeoutMs: timeoutMs,
        warmUpMs: this.config.heartbeatS * 1500,
        // Every heartbeat of a node keeping its period is reconciled; a faster one's are coalesced.
        reconcileIntervalMs: this.config.heartbeatS * 500,
        retryBackoffS: this.config.retryBackoffS,
      },
      this.limits,
      this.nodeBook,
      new CardVetting(new NodeCardPins(this.db), this.config.nodeCards),
    );
    this.jobLogs = new JobLogs(nodes, this.scheduler.view, (message) => this.logger.debug(message));
    const attemptNode = async (jobId: string, attempt: number) => (await this.repo.attempt(jobId, attempt))?.node_id ?? null;
    this.follow = new LogFollow(nodes, this.scheduler.view, attemptNode, this.watch);
    this.followed = new FollowedJobs((id) => this.repo.followed(id));
    this.webhooks = new WebhooksRepository(this.db);
    const ports = {
      repo: this.webhooks,
      detail: async (jobId: string) => {
        const row = await this.repo.find(jobId);
        return row ? this.detail(row) : null;
      },
      secret: async (clientId: string) => (await this.broker.call<{ secret: string | null }, { clientId: string }>("auth.webhookSecret", { clientId })).secret,
      lookup: dnsLookup,
      post: postOnce,
      now: () => this.clock.now(),
    };
    this.sender = new WebhookSender(ports, this.config.webhooks, this.logger);
    this.inserts = new Batcher(
      // The queued-jobs limit and the jobs ahead in each account are counted once per batch and account.
      async (jobs) => {
        const limits = await this.limits.limitsFor([...new Set(jobs.map((j) => j.clientId))]);
        const limitOf = (clientId: string) => limits.get(clientId)!.queuedJobs;
        const { created, refused } = await transaction(this.db, (tx) => this.repo.admitAndInsert(jobs, this.clock.now(), limitOf, tx));
        const positions = await this.positions.ofCreated(created);
        // A job placed already (by a pass since) is next: 1.
        return jobs.map((j) => (refused.has(j.id) ? { refused: refused.get(j.id)! } : { position: positions.get(j.id) ?? 1 }));
      },
      // A job PostgreSQL refuses fails alone (400 for a data error), never its batch.
      { maxBatch: 200, maxInFlight: 2, itemError: fromDataError },
    );
  },

  async started(this: SchedulerThis) {
    await ensureChannelStreams(this.broker, [JOB_EVENTS_CHANNEL]);
    const tick = () =>
      Promise.all([
        this.scheduler.tick(),
        this.keys.removeExpired(this.keysExpireBefore(), KEY_PURGE_LIMIT),
        this.usageOutbox.drain(),
        this.history.run(),
      ]).catch((err) => this.logger.warn(`Scheduler housekeeping failed: ${(err as Error).message}`));
    this.tickTimer = setInterval(() => void tick(), Math.max(MIN_TICK_MS, this.config.scheduleTickMs));
    void this.scheduler.schedule();
    this.sender.start();
  },

  async stopped(this: SchedulerThis) {
    clearInterval(this.tickTimer);
    await this.sender.stop();
    await this.scheduler.stop();
  },
};

export default GpuSchedulerService;
