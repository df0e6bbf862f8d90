/**
 * The placement loop: on request, reads a snapshot under the placement lock, asks the pure `plan`,
 * commits it, hands each placed job to its gpu-node and records the answer (running, back to the
 * queue, or failed). The jobs `plan` left waiting are kept with their reason (`waiting`).
 */
import type { LoggerInstance } from "moleculer";
import { MAX_JOB_SECONDS, type PlatformAccessParams, type RunJobParams } from "../../../lib/job-spec";
import { Batcher, Coalescer } from "./batcher";
import { KnownStates, patched } from "./known-states";
import type { ClusterView, ViewCard } from "../core/cluster-view";
import type { JobWriter } from "./job-writer";
import type { NodeStopper } from "./node-stopper";
import type { AccountLimit, AccountLimits } from "../api/account-limits";
import { AccountShare, plan, type Preemption, Waiting } from "../core/placement";
import type { AssignedJob, PlacementRepository, PlacementRow, PlacementSnapshot } from "../store/placement.repository";
import type { Clock, NodeClient } from "./ports";
import { GrantFailed, type PlatformGrants } from "./platform-grants";
import { confirmPlacement, JobState, preempt, refusePlacement, unplace } from "../core/transitions";

/** The placement transaction (PlacementRepository; a fake in unit tests). */
export type PlacementStore = Pick<PlacementRepository, "anyQueued" | "placeUnderLock">;

const UNIQUE_VIOLATION = "23505";
/** Back-to-back placement passes start at most this often: a busy queue is placed in batches. */
const PASS_INTERVAL_MS = 3;

/** A refusal by the node that retrying elsewhere would not fix (the request itself is bad). */
export function isPermanentRejection(err: unknown): boolean {
  const e = err as { code?: unknown; name?: string };
  return (e.code === 400 || e.code === 422) && e.name !== "ServiceNotFoundError";
}

/**
 * One pass's decision over the snapshot read under the lock: the placements (with their card's
 * name), the jobs left waiting, and how many held cards lie outside the schedulable ones (on
 * suspended or vanished nodes). `readAgain`: more cards are held elsewhere than the read allowed
 * for, so the queue read may have been short.
 */
export function decidePass(
  cards: ViewCard[],
  snapshot: PlacementSnapshot,
  heldElsewhereBefore: number,
  limits: ReadonlyMap<string, AccountLimit> = new Map(),
): { placements: PlacementRow[]; waiting: Waiting[]; preemptions: Preemption[]; heldElsewhere: number; readAgain: boolean } {
  const schedulable = new Set(cards.map((c) => c.uuid));
  const heldElsewhere = [...snapshot.held].filter((uuid) => !schedulable.has(uuid)).length;
  const names = new Map(cards.map((c) => [c.uuid, c.name]));
  const accounts = new Map<string, AccountShare>();
  for (const { clientId = "" } of snapshot.queue) {
    const limit = limits.get(clientId);
    const gpu = limit?.gpuSeconds;
    const credits = limit?.credits;
    accounts.set(clientId, {
      usage: snapshot.usage?.get(clientId) ?? 0,
      held: snapshot.heldBy?.get(clientId) ?? 0,
      weight: limit?.weight ?? 1,
      runningGpus: limit?.runningGpus ?? null,
      overQuota: limit?.overQuota,
      // The quota reserved at placement: each job holding cards may still use its timeoutSeconds × cards.
      ...(gpu && { gpuSecondsLeft: gpu.limit - gpu.used - (snapshot.inFlight?.get(clientId) ?? 0) }),
      // And in credits, each at its card's price.
      ...(credits && {
        creditsLeft:
          credits.limit -
          credits.used -
          [...(snapshot.inFlightByCard?.get(clientId) ?? [])].reduce((sum, [name, s]) => sum + s * credits.perGpuSecond(name), 0),
        creditsPerGpuSecond: credits.perGpuSecond,
      }),
    });
  }
  const { placements, waiting, preemptions } = plan({
    // A drained node's cards count as busy: nothing new starts there, and its jobs wait for "a free GPU".
    cards: cards.map((c) => ({ nodeId: c.nodeId, uuid: c.uuid, name: c.name, busy: snapshot.held.has(c.uuid) || Boolean(snapshot.drained?.has(c.nodeId)) })),
    queue: snapshot.queue,
    accounts,
    arrays: snapshot.arrays,
    preemptible: snapshot.preemptible,
  });
  return {
    placements: placements.map((p) => ({ ...p, gpuName: names.get(p.gpuUuid)! })),
    waiting,
    preemptions,
    heldElsewhere,
    readAgain: heldElsewhere > heldElsewhereBefore,
  };
}

/** A job's state as the placement transaction wrote it: on its card, not started, no result. */
export const asPlaced = (job: AssignedJob): JobState => ({
  status: "assigned",
  nodeId: job.node_id,
  gpuUuid: job.gpu_uuid,
  holding: true,
  assignedAt: job.assigned_at,
  startedAt: null,
  completedAt: null,
  exitCode: null,
  output: null,
  errorMessage: null,
  attempts: job.attempts,
  maxRetries: job.max_retries,
});

export class PlacementLoop {
  private readonly passes: Coalescer;
  /** Placements whose `gpu-node.run` call this replica is making now. */
  private readonly dispatching = new Set<string>();
  private readonly acks: Batcher<AssignedJob, boolean>;
  private stopped = false;
  /** A job was queued since the last pass started. */
  private newJobs = false;
  /** The last pass left jobs waiting: the next one need not ask first whether any does (one round trip less per freed card). */
  private backlog = false;
  /** Cards holding a job outside the schedulable ones (suspended or vanished nodes), at the last pass. */
  private heldElsewhere = 0;
  private waitingNow = new Map<string, Waiting>();

  constructor(
    private readonly places: PlacementStore,
    private readonly writer: JobWriter,
    private readonly view: ClusterView,
    private readonly nodes: Pick<NodeClient, "run">,
    private readonly stopper: NodeStopper,
    private readonly clock: Clock,
    private readonly logger: LoggerInstance,
    private readonly limits?: AccountLimits,
    /** Told what the confirmations wrote: the node's events of these jobs need no read (known-states.ts). */
    private readonly known?: KnownStates,
    /** Makes the credentials of jobs with platformAccess (absent: none are made). */
    private readonly grants?: Pick<PlatformGrants, "grant">,
  ) {
    this.passes = new Coalescer(
      () => this.placeOnce(),
      (err) => this.logger.warn(`Placement pass failed (retried on the next trigger): ${(err as Error).message}`),
      PASS_INTERVAL_MS,
    );
    this.acks = new Batcher((accepted) => this.confirmAccepted(accepted), { maxBatch: 500, maxInFlight: 2 });
  }

  /**
   * The jobs the last pass left waiting, and why: `plan`'s reasons for the jobs that pass read (the
   * oldest of each type, as many as there may be free cards). A pass that reads none (nothing
   * queued, no schedulable card, every card held) leaves it empty: a job absent has no known reason.
   */
  get waiting(): ReadonlyMap<string, Waiting> {
    return this.waitingNow;
  }

  /**
   * Requests a placement pass; resolves once a pass that saw this request has finished.
   * `newJob`: the caller just queued a job (the pass need not check that one waits).
   */
  schedule(opts: { newJob?: boolean } = {}): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (opts.newJob) this.newJobs = true;
    return this.passes.request();
  }

  isDispatching(jobId: string): boolean {
    return this.dispatching.has(jobId);
  }

  /** No new passes; waits for the pass and confirmations under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([this.passes.idle(), this.acks.idle()]);
  }

  private async placeOnce(): Promise<void> {
    const sure = this.newJobs || this.backlog;
    this.newJobs = false;
    const cards = this.view.schedulableCards();
    if (!cards.length || (!sure && !(await this.places.anyQueued()))) {
      this.waitingNow = new Map();
      return;
    }
    let again = false;
    let decided = false;
    let preemptions: Preemption[] = [];
    let outcome: { planned: number; assigned: AssignedJob[] };
    try {
      // The snapshot reads at most as many jobs per type as there may be free cards.
      outcome = await this.places.placeUnderLock(
        cards.length + this.heldElsewhere,
        async (snapshot) => {
          decided = true;
          const limits = this.limits ? await this.limits.limitsFor([...new Set(snapshot.queue.map((q) => q.clientId ?? ""))]) : undefined;
          const pass = decidePass(cards, snapshot, this.heldElsewhere, limits);
          // Jobs read and left waiting, or every free card taken (the read stops at as many jobs as there are free cards).
          const free = cards.filter((c) => !snapshot.held.has(c.uuid)).length;
          this.backlog = snapshot.queue.length > pass.placements.length || (pass.placements.length > 0 && pass.placements.length >= free);
          if (pass.readAgain) again = true; // the bound was too small: read again
          this.heldElsewhere = pass.heldElsewhere;
          this.waitingNow = new Map(pass.waiting.map((w) => [w.jobId, w]));
          preemptions = pass.preemptions;
          return pass.placements;
        },
        this.clock.now(),
      );
    } catch (err) {
      // A card taken outside the lock (should not happen): re-read and decide again.
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) {
        void this.schedule();
        return;
      }
      throw err;
    }
    if (!decided) {
      this.waitingNow = new Map(); // nothing queued
      this.backlog = false;
    }
    // Some planned jobs were cancelled meanwhile (their cards are still free), or the read was short.
    if (again || outcome.assigned.length < outcome.planned) void this.schedule();
    for (const job of outcome.assigned) this.dispatch(job);
    for (const p of preemptions) void this.preempt(p);
  }

  /**
   * Stops a preemptible job for a waiting one: marked first (a pass meanwhile counts its cards as
   * coming free), then its node stops it (SIGTERM, its GPU_PREEMPT_GRACE_S, SIGKILL); its end event
   * sends it back to the queue (transitions.ts). Only ordinary jobs wait for it: no extra work for them.
   */
  private async preempt(p: Preemption): Promise<void> {
    try {
      if (await this.writer.applyOne(p.jobId, (state) => preempt(state))) await this.stopper.stop(p.jobId, p.nodeId, false, true);
    } catch (err) {
      this.logger.warn(`Preemption of job ${p.jobId} for ${p.forJobId} not done (the next pass decides again): ${(err as Error).message}`);
    }
  }

  private dispatch(job: AssignedJob): void {
    this.dispatching.add(job.id);
    // A job of an array learns which one it is (set by the platform, over any variable of the same name).
    const env =
      job.array_id === null || job.array_id === undefined ? job.env : { ...job.env, CI_ARRAY_ID: job.array_id, CI_ARRAY_INDEX: String(job.array_index) };
    const params: RunJobParams = {
      ...job.spec,
      ...(env && { env }),
      jobId: job.id,
      gpuUuid: job.gpu_uuid,
      gpuUuids: job.gpu_uuids,
      attempt: job.attempts,
    };
    // Only a job with platformAccess pays for credentials: the others go to their node as they are.
    const access = job.spec.platformAccess;
    const run = access && this.grants ? this.runWithGrant(job, access, params) : this.nodes.run(job.node_id, params);
    run
      .then(
        () => this.acks.push(job),
        (err) => this.dispatchFailed(job, err),
      )
      .catch((err) => this.logger.warn(`Dispatch of job ${job.id} not recorded: ${(err as Error).message}`))
      .finally(() => this.dispatching.delete(job.id));
  }

  /** The attempt's token and database roles, made now and handed to the node in this call only. */
  private async runWithGrant(job: AssignedJob, access: PlatformAccessParams, params: RunJobParams): Promise<void> {
    const timeoutSeconds = job.spec.timeoutSeconds ?? MAX_JOB_SECONDS;
    const platform = await this.grants!.grant({ clientId: job.client_id, jobId: job.id, attempt: job.attempts, access, timeoutSeconds });
    await this.nodes.run(job.node_id, { ...params, platform });
  }

  /**
   * The nodes accepted these jobs: they hold them now (started once their `started` event says so).
   * One cancelled meanwhile is stopped on its node.
   * Decided first on the state the placement wrote, so the usual case is one write and no read;
   * the compare-and-set catches a job that changed since, which is then read and decided again.
   */
  private async confirmAccepted(accepted: AssignedJob[]): Promise<boolean[]> {
    const acceptedBy = new Map(accepted.map((job) => [job.id, job.node_id]));
    const { written, seen } = await this.writer.apply(new Map(accepted.map((job) => [job.id, asPlaced(job)])), (job, id) =>
      confirmPlacement(job, acceptedBy.get(id)!),
    );
    for (const [id, job] of seen) {
      if (written.has(id)) this.known?.remember(id, patched(job, written.get(id)!));
      else if (job.status === "cancelled" && job.nodeId !== null) void this.stopper.stop(id, job.nodeId);
    }
    return accepted.map((job) => written.has(job.id));
  }

  private async dispatchFailed(job: AssignedJob, err: unknown): Promise<boolean> {
    const message = (err as Error).message;
    if (err instanceof GrantFailed) return this.grantFailed(job, err);
    if (isPermanentRejection(err)) {
      this.logger.warn(`GPU node ${job.node_id} refused job ${job.id}: ${message}`);
      const reason = `The GPU node refused the job: ${message}`;
      await this.writer.applyOne(job.id, (state) => refusePlacement(state, job.node_id, reason, this.clock.now()));
    } else {
      // Unreachable or busy: no more placements there until it is heard from again.
      this.logger.warn(`Could not hand job ${job.id} to GPU node ${job.node_id} (${message}); it goes back to the queue`);
      this.view.suspend(job.node_id);
      await this.writer.applyOne(job.id, (state) => unplace(state, job.node_id));
    }
    void this.schedule();
    return false;
  }

  /**
   * The job's credentials could not be made: the node is not at fault. Refused for good (a
   * database gone since submission), the job fails; otherwise it goes back to the queue and the
   * next housekeeping pass places it again (no pass at once: auth or dbaas may be down).
   */
  private async grantFailed(job: AssignedJob, err: GrantFailed): Promise<boolean> {
    this.logger.warn(`Job ${job.id}: ${err.message}`);
    if (err.permanent) await this.writer.applyOne(job.id, (state) => refusePlacement(state, job.node_id, err.message, this.clock.now()));
    else await this.writer.applyOne(job.id, (state) => unplace(state, job.node_id));
    return false;
  }
}
