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
 *   `nextOffset` until it is null).
 * - node → scheduler, durable channel JOB_EVENTS_CHANNEL (JobEvent): what happened to each job.
 *   Sent over JetStream so nothing is lost while the scheduler restarts; the scheduler applies
 *   each event idempotently and never changes a terminal state.
 */

export const JOB_EVENTS_CHANNEL = "gpu.job-events";
export const HEARTBEAT_EVENT = "gpu-node.heartbeat";

/** One card, in nvidia-smi units: MiB, percent, °C. */
export type GpuCard = {
  uuid: string;
  index: number;
  name: string;
  memoryTotal: number;
  memoryUsed: number;
  utilization: number;
  temperature: number;
};

/** Shape check of a card as nodes send it (messages from the bus are untrusted). */
export function isGpuCard(v: unknown): v is GpuCard {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const c = v as Record<string, unknown>;
  const num = (x: unknown) => typeof x === "number" && Number.isFinite(x);
  const str = (x: unknown) => typeof x === "string" && x.length > 0;
  return str(c.uuid) && num(c.index) && str(c.name) && num(c.memoryTotal) && num(c.memoryUsed) && num(c.utilization) && num(c.temperature);
}

export type NodeHeartbeat = {
  /** The broker nodeID of the gpu-node process: the target of `gpu-node.*` calls. */
  nodeId: string;
  cards: GpuCard[];
  /** Jobs the node is running now (the scheduler cancels any it already considers finished). */
  runningJobIds: string[];
  executor: "docker" | "process";
  /** ISO timestamp of when the node sent this. */
  at: string;
};

export type RunJobParams = {
  jobId: string;
  gpuUuid: string;
  command: string;
  containerImage?: string | null;
};

export type JobEvent =
  | { type: "started"; jobId: string; nodeId: string; gpuUuid: string; at: string }
  | {
      type: "finished";
      jobId: string;
      nodeId: string;
      gpuUuid: string;
      at: string;
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
      at: string;
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
      at: string;
      exitCode: number | null;
      output: string;
      outputBase64?: string;
    };

export type LogsParams = { jobId: string; offset?: number; limit?: number };
/** Byte offsets into the node's log file; `data` is the page's raw bytes in base64 (output is bytes). */
export type LogsPage = { data: string; offset: number; nextOffset: number | null; totalBytes: number };

/**
 * Bytes of output kept in a job's `result.output` (the true tail of everything it printed; when
 * the node's log cap cut the output, a truncation note heads it). `output` is always readable
 * text: bytes that are not UTF-8, and NUL, show as U+FFFD; `outputBase64`, present only when
 * `output` is not exactly the job's bytes, holds them losslessly (lib/output-encoding.ts).
 */
export const OUTPUT_TAIL_BYTES = 64 * 1024;
