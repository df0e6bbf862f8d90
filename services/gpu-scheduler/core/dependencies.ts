/**
 * Dependencies between jobs (`dependsOn`, issue 30): whether a job may be placed, must wait, or can
 * never run, from the state of what it depends on. Pure: the shell reads the targets' states
 * (a job's status; an array's outcome counts) and writes the verdict through the state machine
 * (transitions.ts `releaseWaiting`, `cancelForDependency`).
 *
 * A condition holds of a job when it ended that way: `succeeded` completed, `failed` failed,
 * `finished` any of completed, failed or cancelled. It can no longer hold once the job ended
 * otherwise (a cancelled job neither succeeded nor failed). Of an array it must hold of every job.
 */
import type { DependencyCondition } from "../../../lib/job-spec";

/** How the jobs of an array ended so far. */
export type ArrayOutcomes = { total: number; completed: number; failed: number; cancelled: number };
/** A job's end (null: not ended yet; "gone": removed by retention, or never this account's). */
export type JobEnd = "completed" | "failed" | "cancelled" | null | "gone";

export type DependencyState =
  { condition: DependencyCondition; jobId: string; end: JobEnd } | { condition: DependencyCondition; arrayId: string; outcomes: ArrayOutcomes };

export type DependencyVerdict = { kind: "ready" } | { kind: "wait"; reason: string } | { kind: "cancel"; reason: string };

const VERB: Record<DependencyCondition, string> = { succeeded: "succeed", failed: "fail", finished: "finish" };
const ENDED: Record<Exclude<JobEnd, null>, string> = { completed: "succeeded", failed: "failed", cancelled: "was cancelled", gone: "no longer exists" };

/** Whether a job's end satisfies the condition (null: not decided yet). */
function jobHolds(condition: DependencyCondition, end: JobEnd): boolean | null {
  if (end === null) return null;
  if (end === "gone") return false;
  if (condition === "finished") return true;
  return condition === "succeeded" ? end === "completed" : end === "failed";
}

/** Whether every job of an array satisfies it (null: not decided yet). */
function arrayHolds(condition: DependencyCondition, o: ArrayOutcomes): boolean | null {
  const ended = o.completed + o.failed + o.cancelled;
  if (condition === "succeeded" && o.failed + o.cancelled > 0) return false;
  if (condition === "failed" && o.completed + o.cancelled > 0) return false;
  return ended >= o.total ? true : null;
}

function cancelReason(dep: DependencyState): string {
  if ("jobId" in dep) return `dependency ${dep.jobId} ${ENDED[dep.end ?? "gone"]}, so it cannot ${VERB[dep.condition]} (condition "${dep.condition}")`;
  const o = dep.outcomes;
  const other = dep.condition === "succeeded" ? `${o.failed} failed and ${o.cancelled} cancelled` : `${o.completed} succeeded and ${o.cancelled} cancelled`;
  return `dependency ${dep.arrayId} (array): ${other}, so not every job of it can ${VERB[dep.condition]} (condition "${dep.condition}")`;
}

const waitReason = (dep: DependencyState) =>
  "jobId" in dep ? `waiting for job ${dep.jobId} to ${VERB[dep.condition]}` : `waiting for every job of array ${dep.arrayId} to ${VERB[dep.condition]}`;

/** The verdict on a job's dependencies: cancelled by the first that can no longer hold, else waiting for the first undecided, else ready. */
export function judgeDependencies(deps: readonly DependencyState[]): DependencyVerdict {
  let pending: DependencyState | undefined;
  for (const dep of deps) {
    const holds = "jobId" in dep ? jobHolds(dep.condition, dep.end) : arrayHolds(dep.condition, dep.outcomes);
    if (holds === false) return { kind: "cancel", reason: cancelReason(dep) };
    if (holds === null) pending ??= dep;
  }
  return pending ? { kind: "wait", reason: waitReason(pending) } : { kind: "ready" };
}
