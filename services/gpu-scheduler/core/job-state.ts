/**
 * A stored job as the state machine sees it (transitions.ts): its statuses, its state and the
 * patches written to it, and what several transitions share — back to the queue, and a failed
 * attempt retried or not (RETRY_BACKOFF_S).
 */
export type StoredStatus = "waiting" | "queued" | "assigned" | "running" | "completed" | "failed" | "cancelled";
export type PublicStatus = Exclude<StoredStatus, "assigned" | "waiting">;

const TERMINAL: readonly StoredStatus[] = ["completed", "failed", "cancelled"];
export const isTerminal = (s: StoredStatus) => TERMINAL.includes(s);
export const onCard = (s: StoredStatus) => s === "assigned" || s === "running";

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
export const backToQueue: JobPatch = { status: "queued", nodeId: null, gpuUuid: null, holding: false };

/** RETRY_BACKOFF_S: the wait before the first retry; each later one waits twice the one before. */
export const DEFAULT_RETRY_BACKOFF_S = 5;
export const attemptOf = (job: JobState) => job.attempts || 1;
/** The failure of a time limit is never retried (it would only run into it again). */
const isTimeLimit = (message: string) => message.includes("time limit");

/**
 * A failed attempt (`failed`: the patch that fails the job): back to the queue after a backoff of
 * `backoffS` × 2^(attempt−1) while `attempts <= maxRetries`, the attempt kept; else the failure,
 * which says when the retries ran out. `why`: the failure in words for the statusReason.
 */
export function failOrRetry(job: JobState, failed: JobPatch & { errorMessage: string; completedAt: Date }, why: string, now: Date, backoffS: number): JobPatch {
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
export function nextAttempt(job: JobState, ended: JobPatch & { completedAt: Date }, errorMessage: string): JobPatch {
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

/** Wall seconds the job held its card: up to now while running, up to completion after. */
export function gpuSecondsUsed(job: Pick<JobState, "status" | "startedAt" | "completedAt">, now: Date): number {
  if (!job.startedAt) return 0;
  const end = isTerminal(job.status) ? (job.completedAt ?? job.startedAt) : now;
  return Math.max(0, Math.round(end.getTime() - job.startedAt.getTime()) / 1000);
}
