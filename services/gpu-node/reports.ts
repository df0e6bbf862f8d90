/** What the node tells the scheduler: its heartbeat, and the events of each job's life. */
import type { ExecutorKind, JobEvent, NodeHeartbeat } from "../../lib/gpu-protocol";
import { NodeCard, simulatedTelemetry } from "./discovery";
import type { JobOutcome, RunningJob } from "./job";
import { busyCards } from "./admission";

/** The node's cards (simulated ones with live-looking telemetry: `beat` moves it), its jobs and its executor. */
export function heartbeatOf(nodeId: string, cards: NodeCard[], jobs: ReadonlyMap<string, RunningJob>, executor: ExecutorKind, beat: number): NodeHeartbeat {
  const busy = busyCards(jobs.values());
  const announced = cards.map(({ simulated, ...card }) => (simulated ? { ...card, ...simulatedTelemetry(card.memoryTotal, busy.has(card.uuid), beat) } : card));
  return { nodeId, cards: announced, runningJobIds: [...jobs.keys()], executor, at: new Date().toISOString() };
}

/** `started` is stamped with the job's real start (after any image pull); an outcome carries it too. */
export function jobEventOf(nodeId: string, job: RunningJob, extra: { type: "started" } | JobOutcome): JobEvent {
  const startedAt = job.startedAt?.toISOString();
  const base = { jobId: job.jobId, nodeId, gpuUuid: job.gpuUuid, attempt: job.attempt, at: new Date().toISOString() };
  if (extra.type === "started") return { ...extra, ...base, at: startedAt ?? base.at };
  return { ...extra, ...base, ...(startedAt && { startedAt }) } as JobEvent;
}
