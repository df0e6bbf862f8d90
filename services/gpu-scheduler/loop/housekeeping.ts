/**
 * Housekeeping, every tick on every replica (every step is idempotent): node loss, placements
 * never confirmed, running jobs their node stopped listing, and ended jobs whose card was never
 * confirmed free. The decisions are pure functions below; the class reads and writes around them.
 */
import type { LoggerInstance } from "moleculer";
import type { ClusterView } from "../core/cluster-view";
import type { JobsRepository } from "../store/jobs.repository";
import type { JobStateStore, JobWriter } from "./job-writer";
import type { NodeStopper } from "./node-stopper";
import type { Clock, SchedulerTimings } from "./ports";
import { confirmPlacement, expireQueued, failUnreported, JobPatch, loseNode, unplace } from "../core/transitions";

/** The repository calls housekeeping makes (JobsRepository; an in-memory map in unit tests). */
export interface HousekeepingStore
  extends JobStateStore, Pick<JobsRepository, "statesOnNode" | "nodesHoldingCards" | "running" | "staleAssigned" | "staleHolding" | "expiredQueued"> {}

/** A running job missing from its node's heartbeats this many node timeouts is failed. */
const UNREPORTED_FACTOR = 3;
/** Queue-expired jobs cancelled per pass (the next tick takes the rest). */
const EXPIRE_BATCH = 500;

/** Records a node loss (NodesRepository), for operators' node list. */
export type LostNodeBook = { markLost(nodeId: string, at: Date): Promise<void> };

type JobOnNode = { id: string; node_id: string };
/** What housekeeping reads of the cluster view: the jobs a live node lists (undefined: not live). */
export type RunningOn = (nodeId: string) => ReadonlySet<string> | undefined;

/**
 * A placement unconfirmed for long: the node lists it (it runs: confirm), or it does not (back to
 * the queue); one whose run call this replica is still making waits.
 */
export function staleAssignedAction(job: JobOnNode, runningOn: RunningOn, dispatching: boolean): "wait" | "confirm" | "unplace" {
  if (dispatching) return "wait";
  return runningOn(job.node_id)?.has(job.id) ? "confirm" : "unplace";
}

/**
 * Running jobs their live node stopped listing: since when each has been missing (carried over
 * from the last tick), and those missing for `limitMs` or more, to fail. A job on a node not
 * (or no longer) live is left to node loss.
 */
export function unreportedJobs(
  running: JobOnNode[],
  runningOn: RunningOn,
  dispatching: (jobId: string) => boolean,
  missingSince: ReadonlyMap<string, number>,
  nowMs: number,
  limitMs: number,
): { missingSince: Map<string, number>; fail: JobOnNode[] } {
  const next = new Map<string, number>();
  const fail: JobOnNode[] = [];
  for (const job of running) {
    const listed = runningOn(job.node_id);
    if (!listed || listed.has(job.id) || dispatching(job.id)) continue;
    const since = missingSince.get(job.id) ?? nowMs;
    next.set(job.id, since);
    if (nowMs - since >= limitMs) fail.push(job);
  }
  return { missingSince: next, fail };
}

/** What node loss did, from the patches it wrote. */
export function nodeLossCounts(patches: Iterable<JobPatch>): { failed: number; requeued: number; released: number } {
  const counts = { failed: 0, requeued: 0, released: 0 };
  for (const patch of patches) {
    if (patch.status === "failed" || patch.endedAttempt) counts.failed++;
    else if (patch.status === "queued") counts.requeued++;
    else counts.released++;
  }
  return counts;
}

export class Housekeeping {
  /** Running jobs missing from their node's heartbeats, since when (this replica's view). */
  private unreported = new Map<string, number>();

  constructor(
    private readonly store: HousekeepingStore,
    private readonly writer: JobWriter,
    private readonly view: ClusterView,
    private readonly stopper: NodeStopper,
    private readonly isDispatching: (jobId: string) => boolean,
    private readonly clock: Clock,
    private readonly logger: LoggerInstance,
    private readonly timings: SchedulerTimings,
    private readonly lostNodes?: LostNodeBook,
  ) {}

  async run(): Promise<void> {
    const now = this.clock.now();
    const nowMs = now.getTime();
    const runningOn: RunningOn = (nodeId) => this.view.node(nodeId)?.runningJobIds;
    const lost = new Set(this.view.silent(nowMs, this.timings.nodeTimeoutMs));
    for (const id of this.view.unheard(await this.store.nodesHoldingCards(), nowMs, this.timings.nodeTimeoutMs)) lost.add(id);
    for (const nodeId of lost) await this.nodeLost(nodeId, now);

    // Placements the node never confirmed (this replica or another one died while handing them over).
    for (const job of await this.store.staleAssigned(new Date(nowMs - 2 * this.timings.dispatchTimeoutMs))) {
      const action = staleAssignedAction(job, runningOn, this.isDispatching(job.id));
      if (action === "confirm") await this.writer.applyOne(job.id, (state) => confirmPlacement(state, job.node_id));
      else if (action === "unplace" && (await this.writer.applyOne(job.id, (state) => unplace(state, job.node_id))))
        this.logger.warn(`Job ${job.id} was never confirmed by ${job.node_id}; back to the queue`);
    }
    // Queued jobs past their queueTimeoutSeconds; one placed meanwhile is left alone (compare-and-set).
    const expired = await this.store.expiredQueued(now, EXPIRE_BATCH);
    if (expired.length) {
      const timeouts = new Map(expired.map((j) => [j.id, j.queue_timeout_seconds]));
      await this.writer.applyTo([...timeouts.keys()], (state, id) => expireQueued(state, timeouts.get(id)!, now));
    }
    // Running jobs their live node stopped listing, with no report for a long while: the node
    // restarted and lost them (a report still on its way gets plenty of time first).
    const { missingSince, fail } = unreportedJobs(
      await this.store.running(),
      runningOn,
      this.isDispatching,
      this.unreported,
      nowMs,
      UNREPORTED_FACTOR * this.timings.nodeTimeoutMs,
    );
    for (const job of fail) {
      const message = `GPU node ${job.node_id} no longer runs the job and never reported its end (the node restarted?)`;
      if (await this.writer.applyOne(job.id, (state) => failUnreported(state, job.node_id, message, now, this.timings.retryBackoffS)))
        this.logger.warn(`Job ${job.id}: ${message}`);
    }
    this.unreported = missingSince;
    // Ended jobs whose node never confirmed the card free.
    for (const job of await this.store.staleHolding(new Date(nowMs - this.timings.dispatchTimeoutMs))) {
      if (this.view.has(job.node_id)) void this.stopper.stop(job.id, job.node_id);
    }
  }

  /**
   * A node left the cluster: its running jobs fail, its placed-but-unconfirmed jobs go back to
   * the queue (keeping their FIFO position), its cards are free.
   */
  private async nodeLost(nodeId: string, now: Date): Promise<void> {
    this.view.remove(nodeId);
    await this.lostNodes?.markLost(nodeId, now);
    const seconds = this.timings.nodeTimeoutMs / 1000;
    const message = `GPU node ${nodeId} was lost (no heartbeat for ${seconds} s)`;
    const { written } = await this.writer.apply(await this.store.statesOnNode(nodeId), (job) =>
      loseNode(job, nodeId, message, now, this.timings.retryBackoffS),
    );
    const outcome = nodeLossCounts(written.values());
    if (outcome.failed || outcome.requeued || outcome.released)
      this.logger.warn(`GPU node ${nodeId} lost: ${outcome.failed} running job(s) failed, ${outcome.requeued} placement(s) back in the queue`);
    else this.logger.info(`GPU node ${nodeId} left the cluster`);
  }
}
