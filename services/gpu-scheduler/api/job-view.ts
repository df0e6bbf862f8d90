/** The public shapes of spec 2.4 and 2.5, built from stored rows and the cluster view. */
import { type ClusterStatus, type JobDetail, SHOWN_SPEC_FIELDS } from "../contract";
import type { JobRow } from "../store/job-row";
import type { ViewCard } from "../core/cluster-view";
import { Waiting } from "../core/placement";
import { PRIORITIES, type StoredJob } from "../../../lib/job-spec";
import { gpuSecondsUsed } from "../core/transitions";
import { publicStatus } from "../core/public-status";

/** What a queued job waits for, in words (statusReason), from the last placement pass's reason. */
export function waitingReason(waiting: Waiting, gpuType: string | null): string {
  const matching = gpuType ? ` matching "${gpuType}"` : "";
  const n = waiting.needed ?? 1;
  switch (waiting.reason) {
    case "NO_GPUS":
      return "waiting for a GPU node to join the cluster";
    case "NO_MATCHING_GPU":
      return `waiting for a GPU${matching} to join the cluster`;
    case "NO_NODE_BIG_ENOUGH":
      return `no node has ${n} GPUs${matching} of one type: waiting for one to join the cluster`;
    case "MATCHING_GPUS_BUSY":
      return n > 1 ? `waiting for ${n} free GPUs${matching} on one node` : `waiting for a free GPU${matching}`;
    case "PREEMPTING":
      return `waiting for ${waiting.stopping ?? 1} preemptible job${waiting.stopping === 1 ? "" : "s"} to stop on the GPUs it needs`;
    case "ACCOUNT_LIMIT":
      return `account limit of ${waiting.limit} running GPU${waiting.limit === 1 ? "" : "s"} reached${n > 1 ? ` (this job needs ${n})` : ""}`;
    case "ARRAY_LIMIT":
      return `array limit of ${waiting.limit} running job${waiting.limit === 1 ? "" : "s"} reached (arrayParallelism)`;
    case "QUOTA_EXCEEDED":
      if (waiting.reserved) {
        const worst = waiting.quota === "credits" ? "timeoutSeconds × GPUs × their price" : "timeoutSeconds × GPUs";
        return `monthly ${waiting.quota} quota of the account reserved by its running jobs (${worst}): waiting for one to end`;
      }
      return `monthly ${waiting.quota} quota of the account used up: waiting for the next month or a higher quota`;
  }
}

/** Read-time facts of a queued job: its place in the start order and what it waits for (absent: unknown). */
export type QueuedFacts = { queuePosition?: number; waiting?: Waiting };

/** Real node id → the opaque label clients get (operators keep the real id in logs and the database). */
export type NodeLabeler = (nodeId: string) => string;

/** A message naming the job's node (node lost, restarted) names its label instead. */
function publicMessage(message: string | null, nodeId: string | null, label: NodeLabeler): string | null {
  if (!message || !nodeId || !message.includes(nodeId)) return message;
  return message.split(nodeId).join(label(nodeId));
}

/** The job's document fields the response has no form of its own for: as submitted. */
function submittedExtras(spec: StoredJob): Omit<StoredJob, (typeof SHOWN_SPEC_FIELDS)[number]> {
  const shown: ReadonlyArray<string> = SHOWN_SPEC_FIELDS;
  return Object.fromEntries(Object.entries(spec).filter(([key]) => !shown.includes(key))) as Omit<StoredJob, (typeof SHOWN_SPEC_FIELDS)[number]>;
}

/** `defaultTimeoutS`: JOB_TIMEOUT_S, the limit of a job stored before jobs had their own. */
export function toJobDetail(row: JobRow, now: Date, label: NodeLabeler, defaultTimeoutS: number, queued: QueuedFacts = {}): JobDetail {
  const isQueued = row.status === "queued";
  const hasResult = row.exit_code !== null || row.output !== null;
  const gpuCount = row.gpu_count ?? 1;
  return {
    id: row.id,
    status: publicStatus(row.status, row.started_at),
    // The requested type until a card is assigned, that card's name from then on.
    gpuType: row.gpu_name ?? row.gpu_type ?? "any",
    // Every attempt's time counts, times its cards: the ended ones (kept with the row, multiplied) and the current or last one.
    gpuSecondsUsed:
      Math.round(
        (Number(row.prior_gpu_seconds ?? 0) +
          gpuCount * gpuSecondsUsed({ status: row.status, startedAt: row.started_at, completedAt: row.completed_at }, now)) *
          1000,
      ) / 1000,
    gpuCount,
    createdAt: row.created_at.toISOString(),
    startedAt: row.started_at?.toISOString() ?? null,
    completedAt: row.completed_at?.toISOString() ?? null,
    result: hasResult
      ? {
          exitCode: row.exit_code,
          output: row.output ?? "",
          ...(row.output_base64 !== null && row.output_base64 !== undefined && { outputBase64: row.output_base64 }),
        }
      : null,
    errorMessage: publicMessage(row.error_message, row.node_id, label),
    ...submittedExtras(row.spec),
    command: row.spec.command,
    containerImage: row.spec.containerImage ?? null,
    timeoutSeconds: row.timeout_seconds ?? defaultTimeoutS,
    envNames: row.env_names ?? [],
    queueTimeoutSeconds: row.queue_timeout_seconds ?? null,
    statusReason: row.status_reason ?? (isQueued && queued.waiting ? waitingReason(queued.waiting, row.gpu_type) : null),
    priority: PRIORITIES[row.priority] ?? "normal",
    queuePosition: isQueued ? (queued.queuePosition ?? null) : null,
    maxRetries: row.max_retries ?? 0,
    attempts: row.attempts ?? 0,
    webhookUrl: row.webhook_url ?? null,
    scheduleId: row.schedule_id ?? null,
    preemptions: row.preemptions ?? 0,
    arrayId: row.array_id ?? null,
    arrayIndex: row.array_index ?? null,
  };
}

/** `drained`: nodes an operator drained; their cards stay listed but none is available (it takes no job). */
export function toClusterStatus(
  cards: ViewCard[],
  held: Set<string>,
  queueDepth: number,
  label: NodeLabeler,
  drained: ReadonlySet<string> = new Set(),
): ClusterStatus {
  const gpus = cards.map((c) => ({
    name: c.name,
    available: !held.has(c.uuid) && !drained.has(c.nodeId),
    utilization: c.utilization,
    memoryUsed: c.memoryUsed,
    memoryTotal: c.memoryTotal,
    temperature: c.temperature,
    uuid: c.uuid,
    index: c.index,
    nodeId: label(c.nodeId),
  }));
  const availableGpus = gpus.filter((g) => g.available).length;
  return {
    cluster: { totalGpus: gpus.length, availableGpus, busyGpus: gpus.length - availableGpus, gpus },
    queueDepth,
  };
}
