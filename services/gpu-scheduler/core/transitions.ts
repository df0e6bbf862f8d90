/**
 * The job state machine, whole: every change of a stored job is a pure function of its state
 * (the node's events and a client's cancel here; its run call's answer, node loss, dependencies and
 * housekeeping in node-transitions.ts; the state and what they share in job-state.ts), returning
 * a patch, or null for no change; all of them are exported from here. The scheduler writes the patches through the repository's
 * compare-and-set on (status, holding, node, card), so concurrent replicas never overwrite each
 * other. Only placement (queued → assigned) is written elsewhere: by the placement transaction.
 *
 * Stored statuses are the public ones plus `assigned`: placed on a card, not yet confirmed by the
 * node. A client sees `assigned` as `queued` (it has not started; if the node turns it down it goes
 * back to the queue, and `running → queued` is not a transition clients may see). Stored `running`
 * means the node has the job; it really runs (spec: "executing on a GPU") once its process or
 * container has started, which only the node's report of that moment tells: `startedAt`, null
 * until then (an image pull is not GPU time), and until then the job reads `queued` too.
 * `holding` says the job still occupies its card: from placement until the node confirms it is gone.
 * Stored `waiting` (read as `queued` too): a job whose dependencies (`dependsOn`) do not all hold
 * yet; it is not placed until `releaseWaiting` queues it, or `cancelForDependency` ends it.
 */
import type { JobEvent } from "../../../lib/gpu-protocol";
import { attemptOf, DEFAULT_RETRY_BACKOFF_S, failOrRetry, isTerminal, JobPatch, JobState, nextAttempt, onCard } from "./job-state";

export type { EndedAttempt, JobPatch, JobState, PublicStatus, StoredStatus } from "./job-state";
export { gpuSecondsUsed, isTerminal } from "./job-state";
export {
  cancelForDependency,
  confirmPlacement,
  expireQueued,
  failUnreported,
  failUnstorable,
  loseNode,
  refusePlacement,
  release,
  releaseWaiting,
  stillWaiting,
  unplace,
} from "./node-transitions";

/** The statusReason of a preemptible job stopped for a waiting job and queued again. */
export const PREEMPTED_REASON = "preempted by a higher-priority job";

export type EventOutcome = {
  /** Columns to change; null when the event changes nothing (duplicate, late or stale). */
  patch: JobPatch | null;
  /** The node runs a job it should not (stale placement, or the job already ended here). */
  cancelOnNode: boolean;
};

/** A time a node reported, within what the scheduler knows: a node's clock is not trusted. */
const within = (at: Date, earliest: Date | null, latest: Date) => {
  const upper = at > latest ? latest : at;
  return earliest && earliest > upper ? earliest : upper;
};

/**
 * Applies one node event. Terminal statuses never change; a repeated event returns no patch.
 * Start times come from the node (the `started` event's `at`, or a terminal event's `startedAt`),
 * kept between the placement and `now`; a job with no reported start never ran: no start time,
 * no result, no GPU seconds.
 */
export function applyJobEvent(job: JobState, event: JobEvent, now: Date, backoffS = DEFAULT_RETRY_BACKOFF_S): EventOutcome {
  if (job.nodeId !== event.nodeId || job.gpuUuid !== event.gpuUuid) {
    // Not (or no longer) this node's job: it was put back in the queue or placed elsewhere.
    return { patch: null, cancelOnNode: event.type === "started" };
  }
  // An earlier attempt's report (an event without one comes from a node that runs first attempts only).
  if ((event.attempt ?? 1) !== attemptOf(job)) return { patch: null, cancelOnNode: false };
  const reportedStart = event.type === "started" ? event.at : event.startedAt;
  // Ended before the report (cancelled, node lost): the start counts up to the end at most.
  const startedAt = job.startedAt ?? (reportedStart ? within(new Date(reportedStart), job.assignedAt, job.completedAt ?? now) : null);
  const learntStart: JobPatch | null = !job.startedAt && startedAt ? { startedAt } : null;

  if (event.type === "started") {
    // A retry that starts no longer waits for it.
    const started = learntStart && attemptOf(job) > 1 ? { ...learntStart, statusReason: null } : learntStart;
    if (job.status === "assigned") return { patch: { status: "running", ...started }, cancelOnNode: false };
    if (job.status === "running") return { patch: started, cancelOnNode: false };
    // Ended here without the node saying so (cancelled, node lost): the node must stop it.
    const nodeReportedEnd = job.exitCode !== null || job.output !== null;
    return { patch: learntStart, cancelOnNode: !nodeReportedEnd };
  }

  if (onCard(job.status)) {
    const completedAt = within(new Date(event.at), startedAt ?? job.assignedAt, now);
    // A job that never started has no result (spec 2.4: null while none), only its errorMessage.
    const result = startedAt
      ? { exitCode: event.exitCode, output: event.output, ...(event.outputBase64 !== undefined && { outputBase64: event.outputBase64 }) }
      : {};
    const common = { ...learntStart, completedAt, ...result, holding: false };
    switch (event.type) {
      case "finished":
        return event.exitCode === 0
          ? { patch: { ...common, status: "completed", errorMessage: null }, cancelOnNode: false }
          : {
              patch: failOrRetry(
                job,
                { ...common, status: "failed", errorMessage: `Command exited with code ${event.exitCode}` },
                `exit code ${event.exitCode}`,
                now,
                backoffS,
              ),
              cancelOnNode: false,
            };
      case "failed":
        return {
          patch: failOrRetry(job, { ...common, status: "failed", errorMessage: event.errorMessage }, event.errorMessage, now, backoffS),
          cancelOnNode: false,
        };
      case "cancelled":
        if (job.preempting) return { patch: preempted(job, common), cancelOnNode: false };
        return { patch: { ...common, status: "cancelled", errorMessage: null }, cancelOnNode: false };
    }
  }

  // Already terminal: the node is done with the card; a cancelled job that ran keeps the output for its logs.
  const patch: JobPatch = { ...learntStart };
  if (job.holding) patch.holding = false;
  if (job.status === "cancelled" && startedAt && job.exitCode === null && job.output === null) {
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

/**
 * What a client's cancel writes, the same for every job it applies to (any not finished): so a set
 * of jobs (an array) is cancelled in one statement, JobsRepository.cancelUnfinished, which selects
 * the jobs `cancelJob` accepts (not terminal) and stops those on a card (`onCard`) as it does.
 * The card stays held (holding unchanged) until the node confirms the job is gone.
 */
export const cancelPatch = (now: Date, statusReason?: string): JobPatch => ({
  status: "cancelled",
  completedAt: now,
  ...(statusReason !== undefined && { statusReason }),
});

/** A client's cancel: queued, assigned and running jobs become cancelled at once. */
export function cancelJob(job: JobState, now: Date, statusReason?: string): CancelOutcome {
  if (isTerminal(job.status)) return { ok: false, reason: "finished" };
  return { ok: true, patch: cancelPatch(now, statusReason), stopOnNode: onCard(job.status) };
}

/**
 * A preempted job's node stopped it: back to the queue (its place kept), the attempt kept and
 * counted in `preemptions`, not against its retries.
 */
function preempted(job: JobState, ended: JobPatch & { completedAt: Date }): JobPatch {
  return { ...nextAttempt(job, ended, PREEMPTED_REASON), preempting: false, preemptions: (job.preemptions ?? 0) + 1, statusReason: PREEMPTED_REASON };
}

/** The placement chose to stop this preemptible job for a waiting one: its node is asked to (null: nothing to stop). */
export function preempt(job: JobState): JobPatch | null {
  if (job.status !== "running" || !job.holding || job.preempting) return null;
  return { preempting: true };
}
