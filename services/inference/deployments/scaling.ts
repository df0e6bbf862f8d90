/**
 * The scaling decision of one deployment (issue 29), pure: its settings, its state, its replicas
 * and recent traffic in, how many replicas to start, which to stop and its new status out. The
 * controller (controller.ts) reads the facts, calls this, and carries the plan out.
 */
import { type DeploymentSpec, type DeploymentStatus, FAILURES_TO_FAIL } from "./contract";

export type ReplicaFacts = {
  jobId: string;
  /**
   * starting: queued or running, not ready yet; stopping: its stop was asked for (it takes no
   * requests, and counts for nothing but its end); ended: the job reached a terminal status (not counted yet).
   */
  phase: "starting" | "ready" | "stopping" | "ended";
  /** It became ready at some point (an ended replica that never did counts as a failure). */
  everReady: boolean;
  /** For an ended one: the controller stopped it (a scale-down), so its end is no failure. */
  stopped?: boolean;
  /** For an ended one: why it ended, in words (its exit and output tail). */
  endReason?: string;
  createdAt: number;
};

export type ScalingFacts = {
  spec: Pick<DeploymentSpec, "minReplicas" | "maxReplicas" | "targetInflight" | "idleTimeoutSeconds">;
  status: DeploymentStatus;
  statusReason: string | null;
  failures: number;
  /** A request waits for a replica (a cold start). */
  wanted: boolean;
  lastRequestAt: number | null;
  /** Requests in flight to its replicas now. */
  inflight: number;
  replicas: ReplicaFacts[];
  now: number;
};

export type ScalingPlan = {
  start: number;
  stop: string[];
  /** The ended replicas this decision counted (the controller marks them). */
  ended: string[];
  status: DeploymentStatus;
  statusReason: string | null;
  failures: number;
  desired: number;
  /** No request waits any more: a replica is ready, or the deployment failed. */
  clearWanted: boolean;
};

export function decide(f: ScalingFacts): ScalingPlan {
  let failures = f.failures;
  let reason = f.statusReason;
  const ended = f.replicas.filter((r) => r.phase === "ended");
  for (const r of [...ended].sort((a, b) => a.createdAt - b.createdAt)) {
    if (r.stopped) continue;
    if (r.everReady) failures = 0;
    else {
      failures += 1;
      reason = r.endReason ?? "a replica ended before it became ready";
    }
  }
  const live = f.replicas.filter((r) => r.phase === "starting" || r.phase === "ready");
  const ready = live.filter((r) => r.phase === "ready");
  if (ready.length) failures = 0;
  const failed = failures >= FAILURES_TO_FAIL;

  const idle = f.lastRequestAt === null || f.now - f.lastRequestAt > f.spec.idleTimeoutSeconds * 1000;
  const demand = f.wanted || !idle ? 1 : 0;
  const overloaded = ready.length > 0 && f.inflight > f.spec.targetInflight * ready.length;
  let desired = Math.max(f.spec.minReplicas, demand, overloaded ? ready.length + 1 : 0);
  // With recent traffic no replica is stopped: down-scaling waits for the idle timeout.
  if (!idle) desired = Math.max(desired, live.length);
  desired = failed ? 0 : Math.min(f.spec.maxReplicas, desired);

  const start = Math.max(0, desired - live.length);
  // Stopped first: those not ready yet, then the newest.
  const byStopOrder = [...live].sort((a, b) => Number(a.phase === "ready") - Number(b.phase === "ready") || b.createdAt - a.createdAt);
  const stop = byStopOrder.slice(0, Math.max(0, live.length - desired)).map((r) => r.jobId);

  const running = live.length - stop.length + start;
  const readyKept = ready.filter((r) => !stop.includes(r.jobId)).length;
  const status: DeploymentStatus = failed ? "failed" : readyKept > 0 ? "ready" : running > 0 ? "starting" : "idle";
  const statusReason = failed ? `${FAILURES_TO_FAIL} replicas in a row ended without becoming ready; the last: ${reason}` : null;
  return {
    start,
    stop,
    ended: ended.map((r) => r.jobId),
    status,
    statusReason: failed && f.status === "failed" ? f.statusReason : statusReason,
    failures,
    desired,
    clearWanted: ready.length > 0 || failed,
  };
}
