/**
 * What happens to a job, as pure functions of its stored state: the node's events, a client's
 * cancel, and the public view of a row. The repository applies the returned patches with a
 * compare-and-set on (status, holding), so concurrent replicas never overwrite each other.
 *
 * Stored statuses are the public ones plus `assigned`: placed on a card, not yet confirmed by the
 * node. A client sees `assigned` as `queued` (it has not started; if the node turns it down it goes
 * back to the queue, and `running → queued` is not a transition clients may see). `holding` says
 * the job still occupies its card: from placement until the node confirms it is gone.
 */
import type { JobEvent } from "../../lib/gpu-protocol";

export type StoredStatus = "queued" | "assigned" | "running" | "completed" | "failed" | "cancelled";
export type PublicStatus = Exclude<StoredStatus, "assigned">;

export const TERMINAL: readonly StoredStatus[] = ["completed", "failed", "cancelled"];
export const isTerminal = (s: StoredStatus) => TERMINAL.includes(s);
const onCard = (s: StoredStatus) => s === "assigned" || s === "running";

export type JobState = {
  status: StoredStatus;
  nodeId: string | null;
  gpuUuid: string | null;
  holding: boolean;
  startedAt: Date | null;
  completedAt: Date | null;
  exitCode: number | null;
  output: string | null;
  /** The exact bytes of `output` when it is not plain text (lib/output-encoding.ts). */
  outputBase64?: string | null;
  errorMessage: string | null;
};

export type JobPatch = Partial<Omit<JobState, "nodeId" | "gpuUuid">>;

export type EventOutcome = {
  /** Columns to change; null when the event changes nothing (duplicate, late or stale). */
  patch: JobPatch | null;
  /** The node runs a job it should not (stale placement, or the job already ended here). */
  cancelOnNode: boolean;
};

const later = (a: Date, b: Date | null) => (b && b > a ? b : a);

/** Applies one node event. Terminal statuses never change; a repeated event returns no patch. */
export function applyJobEvent(job: JobState, event: JobEvent): EventOutcome {
  const at = new Date(event.at);
  if (job.nodeId !== event.nodeId || job.gpuUuid !== event.gpuUuid) {
    // Not (or no longer) this node's job: it was put back in the queue or placed elsewhere.
    return { patch: null, cancelOnNode: event.type === "started" };
  }

  if (event.type === "started") {
    if (job.status === "assigned") return { patch: { status: "running", startedAt: job.startedAt ?? at }, cancelOnNode: false };
    if (job.status === "running") return { patch: job.startedAt ? null : { startedAt: at }, cancelOnNode: false };
    // Ended here without the node saying so (cancelled, node lost): the node must stop it.
    const nodeReportedEnd = job.exitCode !== null || job.output !== null;
    return { patch: null, cancelOnNode: !nodeReportedEnd };
  }

  if (onCard(job.status)) {
    const startedAt = job.startedAt ?? at;
    const common = {
      startedAt,
      completedAt: later(at, startedAt),
      exitCode: event.exitCode,
      output: event.output,
      ...(event.outputBase64 !== undefined && { outputBase64: event.outputBase64 }),
      holding: false,
    };
    switch (event.type) {
      case "finished":
        return event.exitCode === 0
          ? { patch: { ...common, status: "completed", errorMessage: null }, cancelOnNode: false }
          : {
              patch: { ...common, status: "failed", errorMessage: `Command exited with code ${event.exitCode}` },
              cancelOnNode: false,
            };
      case "failed":
        return { patch: { ...common, status: "failed", errorMessage: event.errorMessage }, cancelOnNode: false };
      case "cancelled":
        return { patch: { ...common, status: "cancelled", errorMessage: null }, cancelOnNode: false };
    }
  }

  // Already terminal: the node is done with the card; a cancelled job keeps the output for its logs.
  const patch: JobPatch = {};
  if (job.holding) patch.holding = false;
  if (job.status === "cancelled" && job.exitCode === null && job.output === null) {
    patch.exitCode = event.exitCode;
    patch.output = event.output;
    if (event.outputBase64 !== undefined) patch.outputBase64 = event.outputBase64;
  }
  return { patch: Object.keys(patch).length ? patch : null, cancelOnNode: false };
}

export type CancelOutcome =
  | { ok: false; reason: "finished" }
  | {
      ok: true;
      patch: JobPatch;
      /** Ask the node to stop it (it was placed there). */
      stopOnNode: boolean;
    };

/** A client's cancel: queued, assigned and running jobs become cancelled at once. */
export function cancelJob(job: JobState, now: Date): CancelOutcome {
  if (isTerminal(job.status)) return { ok: false, reason: "finished" };
  // The card stays held (holding unchanged) until the node confirms the job is gone.
  return { ok: true, patch: { status: "cancelled", completedAt: now }, stopOnNode: onCard(job.status) };
}

export const publicStatus = (s: StoredStatus): PublicStatus => (s === "assigned" ? "queued" : s);

/** Wall seconds the job held its card: up to now while running, up to completion after. */
export function gpuSecondsUsed(job: Pick<JobState, "status" | "startedAt" | "completedAt">, now: Date): number {
  if (!job.startedAt) return 0;
  const end = isTerminal(job.status) ? (job.completedAt ?? job.startedAt) : now;
  return Math.max(0, Math.round(end.getTime() - job.startedAt.getTime()) / 1000);
}
