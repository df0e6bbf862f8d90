/**
 * The job state machine, whole: every change of a stored job is a pure function here of its state
 * (the node's events, its run call's answer, a client's cancel, node loss, housekeeping) returning
 * a patch, or null for no change. The scheduler writes the patches through the repository's
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

export type StoredStatus = "waiting" | "queued" | "assigned" | "running" | "completed" | "failed" | "cancelled";
export type PublicStatus = Exclude<StoredStatus, "assigned" | "waiting">;

const TERMINAL: readonly StoredStatus[] = ["completed", "failed", "cancelled"];
export const isTerminal = (s: StoredStatus) => TERMINAL.includes(s);
const onCard = (s: StoredStatus) => s === "assigned" || s === "running";

export type JobState = {
  status: StoredStatus;
  nodeId: string | null;
  gpuUuid: string | null;
  holding: boolean;
  /** When the placement was written (the earliest a node may say the job started). */
  assignedAt: Date | null;
  startedAt: Date | null;
  completedAt: Date | null;
  exitCode: number | null;
  output: string | null;
  /** The exact bytes of `output` when it is not plain text (lib/output-encoding.ts). */
  outputBase64?: string | null;
  errorMessage: string | null;
  /** Why the job is where it is, in words (a queue-expired job's reason); written by patches, not read by decisions. */
  statusReason?: string | null;
  /** Attempts started so far (placement counts one; a placement the node never took is given back); absent: 1. */
  attempts?: number;
  /** How many times a failed attempt may be retried (`maxRetries`); absent: 0. */
  maxRetries?: number;
  /** Times it was stopped for a waiting job and queued again (their attempts are not retries); absent: 0. */
  preemptions?: number;
  /** Its node was asked to stop it for a waiting job (preemptible jobs): its end sends it back to the queue. */
  preempting?: boolean;
};

/** One ended attempt of a job that is retried, kept apart (the job's row then describes the next attempt). */
export type EndedAttempt = {
  attempt: number;
  nodeId: string | null;
  startedAt: Date | null;
  endedAt: Date;
  exitCode: number | null;
  output: string | null;
  outputBase64?: string | null;
  errorMessage: string;
};

/** Columns to change. A placement is only ever cleared here (`nodeId: null` clears the whole placement). */
export type JobPatch = Partial<Omit<JobState, "nodeId" | "gpuUuid" | "assignedAt" | "maxRetries">> & {
  nodeId?: null;
  gpuUuid?: null;
  /** Not placeable before this time (a retry's backoff). */
  notBefore?: Date | null;
  /** The attempt that ended, to keep (a retry). */
  endedAttempt?: EndedAttempt;
};

/** Back to the queue at its original position (FIFO is by insertion order), card free. */
const backToQueue: JobPatch = { status: "queued", nodeId: null, gpuUuid: null, holding: false };

/** RETRY_BACKOFF_S: the wait before the first retry; each later one waits twice the one before. */
const DEFAULT_RETRY_BACKOFF_S = 5;
const attemptOf = (job: JobState) => job.attempts || 1;
/** The statusReason of a preemptible job stopped for a waiting job and queued again. */
export const PREEMPTED_REASON = "preempted by a higher-priority job";
/** The failure of a time limit is never retried (it would only run into it again). */
const isTimeLimit = (message: string) => message.includes("time limit");

/**
 * A failed attempt (`failed`: the patch that fails the job): back to the queue after a backoff of
 * `backoffS` × 2^(attempt−1) while `attempts <= maxRetries`, the attempt kept; else the failure,
 * which says when the retries ran out. `why`: the failure in words for the statusReason.
 */
function failOrRetry(job: JobState, failed: JobPatch & { errorMessage: string; completedAt: Date }, why: string, now: Date, backoffS: number): JobPatch {
  // Attempts a preemption ended are not failures: the retries count only the others.
  const attempt = attemptOf(job) - (job.preemptions ?? 0);
  const maxRetries = job.maxRetries ?? 0;
  if (maxRetries === 0) return failed;
  if (attempt > maxRetries || isTimeLimit(failed.errorMessage))
    return {
      ...failed,
      statusReason: `no retry after attempt ${attempt} of ${maxRetries + 1}${attempt > maxRetries ? "" : " (the time limit is never retried)"}`,
    };
  const delayS = backoffS * 2 ** (attempt - 1);
  return {
    ...nextAttempt(job, failed, failed.errorMessage),
    notBefore: new Date(now.getTime() + delayS * 1000),
    statusReason: `retry ${attempt} of ${maxRetries} in ${delayS} s after: ${why}`,
  };
}

/**
 * Back to the queue after an attempt ended (`ended`: how, `errorMessage`: why, kept with it): the
 * row describes the next attempt (not started, no result), the ended one goes to job_attempts.
 */
function nextAttempt(job: JobState, ended: JobPatch & { completedAt: Date }, errorMessage: string): JobPatch {
  const startedAt = ended.startedAt === undefined ? job.startedAt : ended.startedAt;
  return {
    ...backToQueue,
    startedAt: null,
    completedAt: null,
    exitCode: null,
    output: null,
    outputBase64: null,
    errorMessage: null,
    endedAttempt: {
      attempt: attemptOf(job),
      nodeId: job.nodeId,
      startedAt: startedAt ?? null,
      endedAt: ended.completedAt,
      exitCode: ended.exitCode ?? null,
      output: ended.output ?? null,
      ...(ended.outputBase64 !== undefined && { outputBase64: ended.outputBase64 }),
      errorMessage,
    },
  };
}

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

/** A client's cancel: queued, assigned and running jobs become cancelled at once. */
export function cancelJob(job: JobState, now: Date, statusReason?: string): CancelOutcome {
  if (isTerminal(job.status)) return { ok: false, reason: "finished" };
  // The card stays held (holding unchanged) until the node confirms the job is gone.
  const patch: JobPatch = { status: "cancelled", completedAt: now, ...(statusReason !== undefined && { statusReason }) };
  return { ok: true, patch, stopOnNode: onCard(job.status) };
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

// --- the other transitions: (job, what happened) → patch | null ---

const onNode = (job: JobState, nodeId: string) => job.nodeId === nodeId;
/** A placement the node never took: back to the queue, the attempt it counted given back. */
const unplaced = (job: JobState): JobPatch => (job.attempts ? { ...backToQueue, attempts: job.attempts - 1 } : backToQueue);
const failOnCard = (message: string, now: Date) => ({ status: "failed" as const, errorMessage: message, completedAt: now, holding: false });

/**
 * `nodeId` took the job (its run call returned, or its heartbeat lists it): assigned → running,
 * with no start time yet; that comes with the node's `started` event (it may pull an image first).
 */
export function confirmPlacement(job: JobState, nodeId: string): JobPatch | null {
  if (!onNode(job, nodeId) || job.status !== "assigned") return null;
  return { status: "running" };
}

/**
 * `nodeId` did not take the job (unreachable, busy, or never confirmed it): a placed job goes back
 * to the queue; one cancelled meanwhile just frees the card.
 */
export function unplace(job: JobState, nodeId: string): JobPatch | null {
  if (!onNode(job, nodeId) || !job.holding) return null;
  if (job.status === "assigned") return unplaced(job);
  if (job.status === "cancelled") return { holding: false };
  return null;
}

/** `nodeId` refused the job for good (bad request): a placed job fails with the node's reason. */
export function refusePlacement(job: JobState, nodeId: string, message: string, now: Date): JobPatch | null {
  if (!onNode(job, nodeId) || !job.holding) return null;
  if (job.status === "assigned") return failOnCard(message, now);
  if (job.status === "cancelled") return { holding: false };
  return null;
}

/** `nodeId` confirmed an ended job is gone from the card. */
export function release(job: JobState, nodeId: string): JobPatch | null {
  return onNode(job, nodeId) && job.holding && isTerminal(job.status) ? { holding: false } : null;
}

/**
 * `nodeId` left the cluster: a running job fails, a placed-but-unconfirmed one goes back to the
 * queue, an ended one frees its card.
 */
export function loseNode(job: JobState, nodeId: string, message: string, now: Date, backoffS = DEFAULT_RETRY_BACKOFF_S): JobPatch | null {
  if (!onNode(job, nodeId) || !job.holding) return null;
  if (job.status === "running") return failOrRetry(job, failOnCard(message, now), "its GPU node was lost", now, backoffS);
  if (job.status === "assigned") return unplaced(job);
  if (isTerminal(job.status)) return { holding: false };
  return null;
}

/** Every dependency of a waiting job holds (core/dependencies.ts): it may be placed now, at its original place. */
export function releaseWaiting(job: JobState): JobPatch | null {
  return job.status === "waiting" ? { status: "queued", statusReason: null } : null;
}

/** A waiting job's next undecided dependency (`reason`: "waiting for job <id> to …"). */
export function stillWaiting(job: JobState, reason: string): JobPatch | null {
  return job.status === "waiting" ? { statusReason: reason } : null;
}

/** A dependency of a waiting job can no longer hold (`reason`: "dependency <id> …"): cancelled, never placed. */
export function cancelForDependency(job: JobState, reason: string, now: Date): JobPatch | null {
  return job.status === "waiting" ? { status: "cancelled", completedAt: now, statusReason: reason } : null;
}

/** A queued job not started within its `queueTimeoutSeconds` of creation (the caller checked the deadline): cancelled. */
export function expireQueued(job: JobState, queueTimeoutS: number, now: Date): JobPatch | null {
  // A job waiting for a retry has started before: the queue timeout no longer applies.
  if (job.status !== "queued" || (job.attempts ?? 0) > 0) return null;
  return { status: "cancelled", completedAt: now, statusReason: `Queue timeout expired: not started within ${queueTimeoutS} s of submission` };
}

/** A running job its live node no longer has, with no report: it failed there. */
export function failUnreported(job: JobState, nodeId: string, message: string, now: Date, backoffS = DEFAULT_RETRY_BACKOFF_S): JobPatch | null {
  if (!onNode(job, nodeId) || job.status !== "running") return null;
  return failOrRetry(job, failOnCard(message, now), "its GPU node no longer ran the job", now, backoffS);
}

/**
 * A report of the job that cannot be stored (refused data, or out of deliveries): a job still on
 * `nodeId`'s card fails with `message`, and the card is free either way.
 */
export function failUnstorable(job: JobState, nodeId: string, message: string, now: Date): JobPatch | null {
  if (!onNode(job, nodeId) || !(job.holding || onCard(job.status))) return null;
  const completedAt = job.completedAt ?? now;
  return onCard(job.status) ? { ...failOnCard(message, now), completedAt } : { holding: false, completedAt };
}

/** Wall seconds the job held its card: up to now while running, up to completion after. */
export function gpuSecondsUsed(job: Pick<JobState, "status" | "startedAt" | "completedAt">, now: Date): number {
  if (!job.startedAt) return 0;
  const end = isTerminal(job.status) ? (job.completedAt ?? job.startedAt) : now;
  return Math.max(0, Math.round(end.getTime() - job.startedAt.getTime()) / 1000);
}
