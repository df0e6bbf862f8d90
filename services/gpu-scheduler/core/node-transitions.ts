/**
 * The state machine's transitions that are not a node's job event or a client's cancel (those are
 * transitions.ts): a placement taken, refused or never taken, a node lost, a waiting job's
 * dependencies, the queue timeout, and reports that cannot be stored. Each (job, what happened) →
 * patch | null.
 */
import { backToQueue, DEFAULT_RETRY_BACKOFF_S, failOrRetry, isTerminal, JobPatch, JobState, onCard } from "./job-state";

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
