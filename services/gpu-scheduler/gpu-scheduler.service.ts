/**
 * gpu-scheduler: the GPU job API, the durable queue (PostgreSQL) and placement of queued jobs on
 * free cards of the gpu-nodes that announce themselves by heartbeat. Job events come back over the
 * durable JetStream channel, so a report sent while the scheduler restarts is applied later.
 * Several replicas may run: placement is serialised by a PostgreSQL advisory lock and a card
 * can hold one job (unique index); events are applied with compare-and-set.
 * This file is the bus contract only: each handler hands over to the app (app.ts) in one line;
 * README.md in this folder walks the pipeline.
 */
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { type ChannelDef, perSenderChannel } from "../../lib/channels";
import { Type } from "../../lib/contract";
import { brokerEnv } from "../../lib/settings";
import { HEARTBEAT_EVENT, JOB_EVENTS_CHANNEL } from "../../lib/gpu-protocol";
import type { CallerMeta } from "../../lib/identity";
import type { BodyPage } from "../../lib/paged-body";
import { JOB_STATUS_CHANGED } from "../../lib/event-names";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { AdminActionsMixin } from "./api/admin-actions";
import { ReplicaActionsMixin } from "./api/replica-actions";
import { ScheduleActionsMixin } from "./api/schedule-actions";
import { createSchedulerApp, EVENT_ACK_WAIT_NS, EVENT_MAX_RETRIES, JobEventDelivery, SchedulerService } from "./app";
import {
  ArrayCreated,
  ClusterStatus,
  CreatedArray,
  CreatedJob,
  Job,
  JobArray,
  JobArrayView,
  JobCreated,
  JobDetail,
  JobList,
  WebhookDeliveryList,
  WebhookDeliveryView,
} from "./contract";
import * as arrays from "./api/array-actions";
import { IDEMPOTENCY_HEADER } from "./api/idempotency";
import * as jobs from "./api/job-actions";
import type { JobIdParams } from "./api/job-reader";
import type { LogCursor } from "./streams/job-logs";
import { submitJob } from "./api/job-submit";
import type { EventsCursor } from "./streams/job-watch";
import type { FollowCursor } from "./streams/log-follow";
import { migrations } from "./migrations";
import { ACCOUNTS_PARAMS, EVENTS_CURSOR, FOLLOW_CURSOR, JOB_ID_PARAMS, LOGS_CURSOR, LOGS_PARAMS } from "./params";
import { type JobRequest, JobSpec } from "../../lib/job-spec";
import { parseSchedulerSettings } from "./settings";
import type { SchedulerStats } from "./stats";
import type { JobStatusChanged } from "./loop/status-events";
import * as streams from "./streams/streams";

type This = SchedulerService & DbThis;
type Ctx<P, M extends object = CallerMeta> = Context<P, M>;

const GpuSchedulerService: ServiceSchema<ServiceSettingSchema, This> & { channels: Record<string, ChannelDef<This, JobEventDelivery>> } = {
  name: "gpu-scheduler",
  // Every replica serves SSE watchers and follows of any job (job-watch.ts), hence a broadcast.
  emits: [{ event: JOB_STATUS_CHANGED, kind: "broadcast" }],
  publishes: [USAGE_CHANNEL],
  // The operators' actions (admin-actions.ts) live beside the clients' in their own module.
  mixins: [DbMixin({ schema: "gpu_scheduler", migrations, poolSize: 20 }), AdminActionsMixin, ReplicaActionsMixin, ScheduleActionsMixin],

  settings: {
    rest: "/gpu",
  },

  actions: {
    create: {
      rest: "POST /jobs",
      auth: "required",
      scope: "jobs:write",
      openapi: {
        tag: "gpu",
        summary: "Submit a GPU job",
        description:
          "A gpuType matching no card of the cluster is 400, with the known types in details. " +
          "A gpuCount larger than the most cards of one (matching) type on any node, or than the account's running-GPU limit, is 400. " +
          `Optional request header \`${IDEMPOTENCY_HEADER}\` (1 to 255 visible ASCII characters, kept 24 hours per account): ` +
          "the same key with the same body answers the first response again (201, same body and Location) with header " +
          "`Idempotent-Replayed: true` and creates nothing; with a different body it is 422 IDEMPOTENCY_KEY_REUSED; " +
          "concurrent requests with one key create one job. A malformed key is 400 naming the header. " +
          "With arrayCount: that many jobs in one request, answered { arrayId, jobIds, status }. With dependsOn: another account's job or array is 404, " +
          "and a condition that can no longer hold is 400.",
        status: 201,
        response: Type.Union([JobCreated, ArrayCreated]),
        errors: ["IDEMPOTENCY_KEY_REUSED", "QUOTA_EXCEEDED"],
      },
      params: JobSpec,
      handler(this: This, ctx: Ctx<JobRequest>): Promise<CreatedJob | CreatedArray> {
        return submitJob(this.app, ctx);
      },
    },

    list: {
      rest: "GET /jobs",
      auth: "required",
      scope: "jobs:read",
      openapi: {
        tag: "gpu",
        summary: "The caller's 50 most recent jobs, newest first",
        description: "Query `deploymentId`: only the replicas of that model deployment.",
        status: 200,
        response: JobList,
      },
      params: { $$strict: "remove", deploymentId: { type: "string", optional: true, max: 64 } },
      handler(this: This, ctx: Ctx<jobs.ListJobsParams>): Promise<{ jobs: JobDetail[] }> {
        return jobs.listJobs(this.app, ctx);
      },
    },

    get: {
      rest: "GET /jobs/:id",
      auth: "required",
      scope: "jobs:read",
      openapi: { tag: "gpu", summary: "One job", status: 200, response: Job, errors: ["NOT_FOUND"] },
      params: JOB_ID_PARAMS,
      handler(this: This, ctx: Ctx<JobIdParams>): Promise<JobDetail> {
        return jobs.getJob(this.app, ctx);
      },
    },

    /** Queued and running jobs are cancelled at once; a running one is stopped on its node first. */
    cancel: {
      rest: "POST /jobs/:id/cancel",
      auth: "required",
      scope: "jobs:write",
      openapi: { tag: "gpu", summary: "Cancel a queued or running job", status: 200, response: Job, errors: ["NOT_FOUND", "INVALID_STATE"] },
      params: JOB_ID_PARAMS,
      handler(this: This, ctx: Ctx<JobIdParams>): Promise<JobDetail> {
        return jobs.cancelJob(this.app, ctx);
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
      scope: "jobs:read",
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
      params: LOGS_PARAMS,
      handler(this: This, ctx: Ctx<streams.JobLogsParams, streams.PagedMeta>): Promise<BodyPage> {
        return streams.logs(this.app, ctx);
      },
    },

    /** The next page of a followed log: new output, waiting up to GPU_FOLLOW_WAIT_MS for some (log-follow.ts). */
    followPage: {
      visibility: "public",
      callers: ["api-gateway"],
      auth: "required",
      scope: "jobs:read",
      params: FOLLOW_CURSOR,
      handler(this: This, ctx: Ctx<FollowCursor>): Promise<BodyPage> {
        return streams.followPage(this.app, ctx);
      },
    },

    /** The client of a followed log left: the node ends the page wait in flight at once. */
    followStop: {
      visibility: "public",
      callers: ["api-gateway"],
      auth: "required",
      scope: "jobs:read",
      params: FOLLOW_CURSOR,
      handler(this: This, ctx: Ctx<FollowCursor>): Promise<{ stopped: true }> {
        return streams.followStop(this.app, ctx);
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
      scope: "jobs:read",
      openapi: {
        tag: "gpu",
        summary: "The files the job left under /out, as a tar (streamed, chunked); 404 while there are none",
        status: 200,
        response: Type.String({ format: "binary" }),
        contentType: "application/x-tar",
        errors: ["NOT_FOUND"],
      },
      params: JOB_ID_PARAMS,
      handler(this: This, ctx: Ctx<JobIdParams, streams.PagedMeta>): Promise<BodyPage> {
        return streams.artifacts(this.app, ctx);
      },
    },

    /** The next page of a `logs` or `artifacts` answer; the same caller, so another account's job is the same 404. */
    logsPage: {
      visibility: "public",
      callers: ["api-gateway"], // the gateway fetches the pages as its client reads
      auth: "required",
      scope: "jobs:read",
      params: LOGS_CURSOR,
      handler(this: This, ctx: Ctx<LogCursor>): Promise<BodyPage> {
        return streams.logsPage(this.app, ctx);
      },
    },

    /** Server-sent events: the job's detail now, then at each status change; ends after a terminal one (job-watch.ts). */
    events: {
      rest: "GET /jobs/:id/events",
      streams: true,
      auth: "required",
      scope: "jobs:read",
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
      handler(this: This, ctx: Ctx<JobIdParams, streams.PagedMeta>): Promise<BodyPage> {
        return streams.events(this.app, ctx);
      },
    },

    /** The next event of an `events` stream (or a keep-alive after GPU_EVENTS_KEEPALIVE_MS); the same caller's job only. */
    eventsPage: {
      visibility: "public",
      callers: ["api-gateway"],
      auth: "required",
      scope: "jobs:read",
      params: EVENTS_CURSOR,
      handler(this: This, ctx: Ctx<EventsCursor>): Promise<BodyPage> {
        return streams.eventsPage(this.app, ctx);
      },
    },

    /** An array of the caller's jobs: its jobs counted by status (issue 30). */
    array: {
      rest: "GET /arrays/:id",
      auth: "required",
      scope: "jobs:read",
      openapi: { tag: "gpu", summary: "A job array: its jobs by status", status: 200, response: JobArray, errors: ["NOT_FOUND"] },
      params: JOB_ID_PARAMS,
      handler(this: This, ctx: Ctx<JobIdParams>): Promise<JobArrayView> {
        return arrays.getArray(this.app, ctx);
      },
    },

    /** Cancels every unfinished job of the array. */
    cancelArray: {
      rest: "POST /arrays/:id/cancel",
      auth: "required",
      scope: "jobs:write",
      openapi: { tag: "gpu", summary: "Cancel every unfinished job of an array", status: 200, response: JobArray, errors: ["NOT_FOUND"] },
      params: JOB_ID_PARAMS,
      handler(this: This, ctx: Ctx<JobIdParams>): Promise<JobArrayView> {
        return arrays.cancelArray(this.app, ctx);
      },
    },

    /** The account's webhook deliveries, newest first (webhook-sender.ts). */
    deliveries: {
      rest: { method: "GET", basePath: "/webhooks", path: "/deliveries" },
      auth: "required",
      scope: "jobs:read",
      openapi: { tag: "gpu", summary: "The account's 100 most recent webhook deliveries, newest first", status: 200, response: WebhookDeliveryList },
      handler(this: This, ctx: Ctx<unknown>): Promise<{ deliveries: WebhookDeliveryView[] }> {
        return jobs.deliveries(this.app, ctx);
      },
    },

    status: {
      rest: "GET /status",
      auth: "required",
      scope: "jobs:read",
      openapi: { tag: "gpu", summary: "Cluster status: GPUs and queue depth", status: 200, response: ClusterStatus },
      handler(this: This): Promise<ClusterStatus> {
        return jobs.clusterStatus(this.app);
      },
    },

    /** Internal: what each account holds and has queued now, for its usage and quotas. */
    accountState: {
      visibility: "public",
      callers: ["usage"],
      params: ACCOUNTS_PARAMS,
      handler(this: This, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, jobs.PendingAccountState>> {
        return jobs.accountState(this.app, ctx.params.clientIds);
      },
    },

    /** Internal: figures for the metrics service. */
    stats: {
      visibility: "public",
      callers: ["metrics"],
      handler(this: This): Promise<SchedulerStats> {
        return jobs.stats(this.app);
      },
    },
  },

  events: {
    /** Any replica's committed change wakes this replica's watchers of that job. */
    [JOB_STATUS_CHANGED]: {
      handler(this: This, ctx: Context<JobStatusChanged>) {
        this.app.onStatusChanged(ctx.params);
      },
    },
    [HEARTBEAT_EVENT]: {
      handler(this: This, ctx: Context<unknown>) {
        return this.app.onHeartbeat(ctx.params, ctx.nodeID);
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
      handler(this: This, payload: unknown, raw?: JobEventDelivery) {
        return this.app.onJobEvent(payload, raw);
      },
    },
  },

  created(this: This) {
    this.app = createSchedulerApp(this.broker, this.db, parseSchedulerSettings(brokerEnv(this.broker)), this.logger);
  },

  async started(this: This) {
    await this.app.start();
  },

  async stopped(this: This) {
    await this.app.stop();
  },
};

export default GpuSchedulerService;
