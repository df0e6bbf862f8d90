/**
 * The contract between gpu-node (one per GPU host) and gpu-scheduler.
 *
 * - node → scheduler, broker event `gpu-node.heartbeat` (NodeHeartbeat): sent when the node starts
 *   and every GPU_HEARTBEAT_S after; it announces the node's cards with live telemetry and the
 *   jobs it is running. A node silent for GPU_NODE_TIMEOUT_S is lost.
 * - scheduler → node, actions called on that node (`{ nodeID }` call option):
 *   `gpu-node.run` (RunJobParams → { accepted: true }, returns as soon as the job is handed to the
 *   executor), `gpu-node.cancel` ({ jobId } → { stopped }), `gpu-node.logs` (LogsParams →
 *   LogsPage: one page of the job's whole output, since a bus message must stay small; follow
 *   `nextOffset` until it is null), `gpu-node.artifacts` (LogsParams → LogsPage: the same paging
 *   of the tar of what the job left under /out; NOT_FOUND while there is none).
 * - node → scheduler, durable channel JOB_EVENTS_CHANNEL (JobEvent): what happened to each job.
 *   Sent over JetStream so nothing is lost while the scheduler restarts; the scheduler applies
 *   each event idempotently and never changes a terminal state.
 *
 * Owned by the node side (it sends the heartbeat and the events); it lives in lib/ because the
 * scheduler, metrics and the bus-permission table (lib/bus-permissions.ts) all read it. The checks
 * of what nodes send are here too, beside the types they check: messages from the bus are
 * untrusted, and a check kept apart from its type drifts (a new executor kind once made every
 * heartbeat of its node fail the scheduler's check).
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { type Checked, messageCheck } from "./message-check";
import { storableText } from "./output-encoding";
import { UUID_PATTERN } from "./uuid";

export type { Checked };

export const JOB_EVENTS_CHANNEL = "gpu.job-events";
/**
 * Job events of one node the stream holds unapplied at most (a node's real burst, e.g. 100 jobs
 * ending at once, is far below); past it the server refuses the node's publishes and its publish
 * queue retries them, so a node flooding events delays other nodes' events by at most this many.
 */
export const MAX_UNAPPLIED_EVENTS_PER_NODE = 256;
export const HEARTBEAT_EVENT = "gpu-node.heartbeat";

/** How a node runs jobs (services/gpu-node/executor-setup.ts): the one list the type, the check and the node use. */
export const EXECUTOR_KINDS = ["docker", "process"] as const;
export type ExecutorKind = (typeof EXECUTOR_KINDS)[number];

const Name = Type.String({ minLength: 1 });
const Time = Type.String({ format: "date-time" });

/** One card, in nvidia-smi units: MiB, percent, °C (finite numbers). */
const GpuCardSchema = Type.Object({
  uuid: Name,
  index: Type.Number(),
  name: Name,
  memoryTotal: Type.Number(),
  memoryUsed: Type.Number(),
  utilization: Type.Number(),
  temperature: Type.Number(),
});
export type GpuCard = Static<typeof GpuCardSchema>;

const NodeHeartbeatSchema = Type.Object({
  /** The broker nodeID of the gpu-node process: the target of `gpu-node.*` calls. */
  nodeId: Name,
  cards: Type.Array(GpuCardSchema),
  /** Jobs the node is running now (the scheduler cancels any it already considers finished). */
  runningJobIds: Type.Array(Name),
  executor: Type.Union(EXECUTOR_KINDS.map((k) => Type.Literal(k))),
  /** ISO timestamp of when the node sent this. */
  at: Type.String(),
});
export type NodeHeartbeat = Static<typeof NodeHeartbeatSchema>;

// The job itself (RunJobParams for `gpu-node.run`, its limits and env rules) is declared once, in job-spec.ts.

export type JobEvent =
  /** `at`: when the job's process or container started (after any image pull), not when the node took the job. */
  | { type: "started"; jobId: string; nodeId: string; gpuUuid: string; at: string; attempt?: number }
  | {
      type: "finished";
      jobId: string;
      nodeId: string;
      gpuUuid: string;
      /** The attempt reported on (RunJobParams.attempt); absent: 1. */
      attempt?: number;
      at: string;
      /** When the job's process or container started (absent: it never did). */
      startedAt?: string;
      exitCode: number;
      /** Last 64 KiB of stdout+stderr, readable (see JobOutput). */
      output: string;
      outputBase64?: string;
    }
  | {
      /** The job could not run or was stopped by the node (image missing, time limit, executor error). */
      type: "failed";
      jobId: string;
      nodeId: string;
      gpuUuid: string;
      /** The attempt reported on (RunJobParams.attempt); absent: 1. */
      attempt?: number;
      at: string;
      startedAt?: string;
      errorMessage: string;
      exitCode: number | null;
      output: string;
      outputBase64?: string;
    }
  | {
      /** The node stopped the job after `gpu-node.cancel`. */
      type: "cancelled";
      jobId: string;
      nodeId: string;
      gpuUuid: string;
      /** The attempt reported on (RunJobParams.attempt); absent: 1. */
      attempt?: number;
      at: string;
      startedAt?: string;
      exitCode: number | null;
      output: string;
      outputBase64?: string;
    };

/** What every job event carries; `attempt`: the attempt reported on (RunJobParams.attempt), absent: 1. */
const EventBase = Type.Object({
  jobId: Type.String({ pattern: UUID_PATTERN }),
  nodeId: Name,
  gpuUuid: Name,
  at: Time,
  attempt: Type.Optional(Type.Integer({ minimum: 1 })),
  type: Type.Union(["started", "finished", "failed", "cancelled"].map((t) => Type.Literal(t))),
});
/** What an event of each type carries beyond the base (a terminal one: its end). */
const ended = (exitCode: TSchema, more: Record<string, TSchema> = {}) =>
  Type.Object({ startedAt: Type.Optional(Time), ...more, exitCode, output: Type.String(), outputBase64: Type.Optional(Type.String()) });
const EVENT_BODY: Record<JobEvent["type"], TSchema> = {
  started: Type.Object({}),
  finished: ended(Type.Integer()),
  failed: ended(Type.Union([Type.Integer(), Type.Null()]), { errorMessage: Name }),
  cancelled: ended(Type.Union([Type.Integer(), Type.Null()])),
};

/** `attempt`: which attempt's log (absent: 1). */
export type LogsParams = { jobId: string; attempt?: number; offset?: number; limit?: number };

/**
 * `gpu-node.follow`: the output of one attempt from `offset`, waiting up to `waitMs` for some when
 * there is none yet and the attempt still runs there; `fid` names the follow, so that
 * `gpu-node.followStop` ({ fid }) ends its wait when the client leaves.
 */
export type FollowParams = { jobId: string; attempt?: number; offset: number; fid: string; waitMs: number };
/** `end`: the offset after `data`; `live`: the attempt still runs on the node (its log may grow). */
export type FollowPage = { data: string; end: number; live: boolean };
/** Byte offsets into the node's log file; `data` is the page's raw bytes in base64 (output is bytes). */
export type LogsPage = { data: string; offset: number; nextOffset: number | null; totalBytes: number };

/**
 * Bytes of output kept in a job's `result.output` (the true tail of everything it printed; when
 * the node's log cap cut the output, a truncation note heads it). `output` is always readable
 * text: bytes that are not UTF-8, and NUL, show as U+FFFD; `outputBase64`, present only when
 * `output` is not exactly the job's bytes, holds them losslessly (lib/output-encoding.ts).
 */
export const OUTPUT_TAIL_BYTES = 64 * 1024;

const heartbeatCheck = messageCheck<NodeHeartbeat>(NodeHeartbeatSchema);
const eventBaseCheck = messageCheck<{ type: JobEvent["type"] }>(EventBase);
const eventBodyChecks = Object.fromEntries(Object.entries(EVENT_BODY).map(([type, schema]) => [type, messageCheck<JobEvent>(schema)]));

export const checkHeartbeat = (v: unknown): Checked<NodeHeartbeat> => heartbeatCheck(v);

/** Room for the tail, its truncation note and the escaping of odd bytes; a real node sends less. */
const MAX_OUTPUT_CHARS = 4 * OUTPUT_TAIL_BYTES;
const MAX_ERROR_CHARS = 2000;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * A well-formed job event, made storable whatever the node put in it: NUL and lone surrogates
 * replaced, an oversized output cut to its end, a malformed `outputBase64` dropped. A terminal
 * event is never refused for its content, so it always frees its card.
 */
export function checkJobEvent(v: unknown): Checked<JobEvent> {
  const base = eventBaseCheck(v);
  if (!base.ok) return base;
  const body = eventBodyChecks[base.value.type](v);
  if (!body.ok) return body;
  const event = body.value;
  if (event.type === "started") return { ok: true, value: event };
  const { outputBase64, ...rest } = event;
  const clean = { ...rest, output: storableText(event.output.slice(-MAX_OUTPUT_CHARS)) };
  const bytes = typeof outputBase64 === "string" && outputBase64.length <= MAX_OUTPUT_CHARS && BASE64.test(outputBase64) ? { outputBase64 } : {};
  if (event.type === "failed")
    return { ok: true, value: { ...clean, ...bytes, errorMessage: storableText(event.errorMessage).slice(0, MAX_ERROR_CHARS) } as JobEvent };
  return { ok: true, value: { ...clean, ...bytes } as JobEvent };
}
