/**
 * gpu-node: one per GPU host. Announces its cards (nvidia-smi, or GPU_SIMULATE) with live
 * telemetry in a heartbeat, runs the jobs the scheduler places on them (Docker by default,
 * bubblewrap-sandboxed processes on hosts without it; executor-setup.ts) and reports each job's life on the durable job-events channel.
 * Internal only: the scheduler calls `run`, `cancel`, `logs`, `follow` and `artifacts` on the node that holds the card;
 * inference calls `serve` (or `serveTicket`, for the direct channel) to reach a model deployment's replica (serve-relay.ts, serve-direct.ts).
 * The node itself is put together in app.ts; whether it takes a job, in admission.ts.
 *
 * On SIGTERM it refuses new work and publishes what it still has to report. Docker jobs keep
 * running and are re-adopted when the node comes back; process jobs are stopped and failed.
 */
import type { Readable } from "stream";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { brokerEnv } from "../../lib/settings";
import { FollowPage, FollowParams, HEARTBEAT_EVENT, JOB_EVENTS_CHANNEL, LogsPage, LogsParams } from "../../lib/gpu-protocol";
import { MAX_JOB_ATTEMPTS, RunJob, type RunJobParams } from "../../lib/job-spec";
import { addReadinessCheck } from "../../lib/health";
import { JOB_ID_PATTERN, JobExecutor, JobLimits } from "./job";
import { parseGpuNodeSettings } from "./settings";
import { LOGS_PAGE_BYTES } from "./log-store";
import { createGpuNode, GpuNode } from "./app";
import { serveAnswer } from "./serve-relay";
import { SERVE_WIRE, type ServeMeta, type ServeTicket } from "../../lib/deployment-protocol";
import { DirectServe } from "./serve-direct";

export type CancelParams = { jobId: string; preempt?: boolean };

const JOB_ID = { type: "string", pattern: JOB_ID_PATTERN } as const;
const ATTEMPT = { type: "number", optional: true, integer: true, min: 1, max: MAX_JOB_ATTEMPTS, convert: true } as const;
/** A page of a job's file (`logs`, `artifacts`): a bus message must stay small. */
const PAGE_PARAMS = {
  $$strict: "remove",
  jobId: JOB_ID,
  offset: { type: "number", integer: true, min: 0, optional: true, convert: true },
  limit: { type: "number", integer: true, min: 4, max: LOGS_PAGE_BYTES, optional: true, convert: true },
} as const;
/** What `run` takes (RunJobParams): the job as the scheduler places it on this node. */

type GpuNodeThis = Service & {
  node: GpuNode;
  /** The direct serve channel, when GPU_SERVE_LISTEN sets one. */
  direct?: DirectServe;
  /** A method, so that a mixin may run jobs another way (bench/scheduler-nodes.ts: a no-op executor). */
  chooseExecutor(): Promise<JobExecutor | undefined>;
  jobLimits(): JobLimits;
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
      // The job's own schema (lib/job-spec.ts): what the scheduler stored and placed, checked here again.
      params: RunJob,
      async handler(this: GpuNodeThis, ctx: Context<RunJobParams>): Promise<{ accepted: true }> {
        return this.node.run(ctx.params);
      },
    },

    /** Stops a job this node runs (also one it adopted after a restart). */
    cancel: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: { $$strict: "remove", jobId: JOB_ID, preempt: { type: "boolean", optional: true } },
      async handler(this: GpuNodeThis, ctx: Context<CancelParams>): Promise<{ stopped: boolean }> {
        return this.node.cancel(ctx.params.jobId, ctx.params.preempt);
      },
    },

    /** A page of a job's whole output as raw bytes (a bus message must stay small): follow `nextOffset` until null. */
    logs: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: { ...PAGE_PARAMS, attempt: ATTEMPT },
      async handler(this: GpuNodeThis, ctx: Context<LogsParams>): Promise<LogsPage> {
        return this.node.logs.logs(ctx.params);
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
        return this.node.logs.follow(ctx.params);
      },
    },

    /** The client of follow `fid` left: its page in flight returns now, and later ones at once. */
    followStop: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: { $$strict: "remove", fid: { type: "string", min: 1, max: 64 } },
      handler(this: GpuNodeThis, ctx: Context<{ fid: string }>): { stopped: boolean } {
        return { stopped: this.node.logs.followers.stop(ctx.params.fid) };
      },
    },

    /**
     * A connection to the port of a model deployment's replica this node runs (serve-relay.ts):
     * the request stream's bytes go to it, its answer comes back as the returned stream. Job in
     * meta (`jobId`); over the bus only, from inference.
     */
    serve: {
      visibility: "public",
      callers: ["inference"],
      // The bytes may travel as latin1 strings (lib/deployment-protocol.ts): callers read it here, in the registry.
      wire: SERVE_WIRE,
      handler(this: GpuNodeThis, ctx: Context<Readable, ServeMeta>): Promise<Readable> {
        return serveAnswer(this.node.config.relay.dir, ctx.meta.jobId, ctx.params, ctx.meta.wire);
      },
    },

    /**
     * A ticket for one connection of the direct serve channel to the replica `jobId`
     * (serve-direct.ts): where to connect, and the TLS pre-shared key and identity to connect with.
     * null when this node has no such channel (GPU_SERVE_LISTEN unset): the caller uses `serve`.
     */
    serveTicket: {
      visibility: "public",
      callers: ["inference"],
      params: { $$strict: "remove", jobId: JOB_ID },
      handler(this: GpuNodeThis, ctx: Context<{ jobId: string }>): ServeTicket | null {
        return this.direct?.ticket(ctx.params.jobId) ?? null;
      },
    },

    /** A page of the tar of what the job left under /out, paged as `logs`; NOT_FOUND when it left nothing (or not yet). */
    artifacts: {
      visibility: "public",
      callers: ["gpu-scheduler"],
      params: PAGE_PARAMS,
      async handler(this: GpuNodeThis, ctx: Context<LogsParams>): Promise<LogsPage> {
        return this.node.logs.artifacts(ctx.params);
      },
    },
  },

  events: {
    /**
     * Moleculer tells other nodes about this node's actions up to 1 s after start (a debounced
     * INFO): tell them now, then begin heartbeats, so a scheduler can call the node it hears from.
     */
    async "$broker.started"(this: GpuNodeThis) {
      await this.node.announce();
    },
    /** A scheduler that just joined hears about this node at once, not a heartbeat later. */
    "$node.connected"(this: GpuNodeThis) {
      this.node.greetNewNode();
    },
  },

  methods: {
    chooseExecutor(this: GpuNodeThis): Promise<JobExecutor | undefined> {
      return this.node.chooseExecutor();
    },

    jobLimits(this: GpuNodeThis): JobLimits {
      return this.node.jobLimits();
    },
  },

  created(this: GpuNodeThis) {
    this.node = createGpuNode({
      config: parseGpuNodeSettings(brokerEnv(this.broker)),
      broker: this.broker,
      logger: this.logger,
      addReadinessCheck: (name, check) => addReadinessCheck(this, name, check),
      executor: () => this.chooseExecutor(),
    });
    const { serveListen, serveAddress, relay } = this.node.config;
    if (serveListen) this.direct = new DirectServe({ relayDir: relay.dir, ...serveListen, advertisedHost: serveAddress });
  },

  async started(this: GpuNodeThis) {
    await this.direct?.listen();
    await this.node.start();
  },

  async stopped(this: GpuNodeThis) {
    await this.direct?.close();
    await this.node.stop();
  },
};

export default GpuNodeService;
