/**
 * The shell around the pure parts: reads a snapshot, asks `plan`, commits it, dispatches to
 * gpu-nodes, applies their events and heartbeats, and handles node loss. Its I/O sits behind
 * narrow dependencies (the two repositories, a node client, a clock) so the service file only
 * wires broker events to it.
 */
import type { LoggerInstance } from "moleculer";
import type { JobEvent, NodeHeartbeat, RunJobParams } from "../../lib/gpu-protocol";
import { isDataError } from "../../lib/errors";
import { Batcher, Coalescer } from "./batcher";
import { ClusterView } from "./cluster-view";
import { JobRow, JobsRepository } from "./jobs.repository";
import { AssignedJob, PlacementRepository } from "./placement.repository";
import { plan } from "./placement";
import { UUID } from "./protocol-guards";
import { applyJobEvent, cancelJob, isTerminal, JobPatch, JobState } from "./transitions";

/** The calls the scheduler makes on one gpu-node (services/gpu-node), by its broker node id. */
export interface NodeClient {
  run(nodeId: string, params: RunJobParams): Promise<void>;
  cancel(nodeId: string, jobId: string): Promise<{ stopped: boolean }>;
}

export type Clock = { now(): Date };

export type SchedulerSettings = {
  nodeTimeoutMs: number;
  dispatchTimeoutMs: number;
  /** Until this long after start, not every live node has announced itself yet. */
  warmUpMs: number;
};

const UNIQUE_VIOLATION = "23505";
/** PostgreSQL refused the data itself (class 22: bad encoding, out of range…): retrying cannot help. */
export const UNSTORABLE_EVENT_MESSAGE = "The GPU node's report of this job could not be stored; its output is in the job's logs";
const CAS_ATTEMPTS = 5;
/** Back-to-back placement passes start at most this often: a busy queue is placed in batches. */
const PASS_INTERVAL_MS = 3;
/** A running job missing from its node's heartbeats this many node timeouts is failed. */
const UNREPORTED_FACTOR = 3;

/** A refusal by the node that retrying elsewhere would not fix (the request itself is bad). */
function isPermanentRejection(err: unknown): boolean {
  const e = err as { code?: unknown; name?: string };
  return (e.code === 400 || e.code === 422) && e.name !== "ServiceNotFoundError";
}

export class Scheduler {
  readonly view: ClusterView;
  private readonly placement: Coalescer;
  /** Placements whose `gpu-node.run` call this replica is making now. */
  private readonly dispatching = new Set<string>();
  private readonly acks: Batcher<string, boolean>;
  private readonly events: Batcher<JobEvent, void>;
  private stopped = false;
  private ticking = false;
  /** A job was queued since the last pass started. */
  private newJobs = false;
  /** Cards holding a job outside the schedulable ones (suspended or vanished nodes), at the last pass. */
  private heldElsewhere = 0;
  /** Running jobs missing from their node's heartbeats, since when (this replica's view). */
  private unreported = new Map<string, number>();

  constructor(
    private readonly repo: JobsRepository,
    private readonly places: PlacementRepository,
    private readonly nodes: NodeClient,
    private readonly clock: Clock,
    private readonly logger: LoggerInstance,
    private readonly settings: SchedulerSettings,
  ) {
    this.view = new ClusterView(clock.now().getTime());
    this.placement = new Coalescer(
      () => this.placeOnce(),
      (err) => this.logger.warn(`Placement pass failed (retried on the next trigger): ${(err as Error).message}`),
      PASS_INTERVAL_MS,
    );
    this.acks = new Batcher((ids) => this.confirmStarted(ids), { maxBatch: 500, maxInFlight: 2 });
    this.events = new Batcher((events) => this.applyEvents(events), { maxBatch: 200, maxInFlight: 2 });
  }

  /**
   * Requests a placement pass; resolves once a pass that saw this request has finished.
   * `newJob`: the caller just queued a job (the pass need not check that one waits).
   */
  schedule(opts: { newJob?: boolean } = {}): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (opts.newJob) this.newJobs = true;
    return this.placement.request();
  }

  /** No new passes; waits for the pass, event and confirmation batches under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([this.placement.idle(), this.acks.idle(), this.events.idle()]);
  }

  /** Whether a job may ask for `gpuType`: some card matches, or the cluster is not fully known yet. */
  warmingUp(): boolean {
    return this.clock.now().getTime() - this.view.sinceMs < this.settings.warmUpMs;
  }

  // --- placement ---

  private async placeOnce(): Promise<void> {
    const sure = this.newJobs;
    this.newJobs = false;
    const cards = this.view.schedulableCards();
    if (!cards.length || (!sure && !(await this.places.anyQueued()))) return;
    const schedulable = new Set(cards.map((c) => c.uuid));
    let again = false;
    let outcome: { planned: number; assigned: AssignedJob[] };
    try {
      // The snapshot reads at most as many jobs per type as there may be free cards.
      outcome = await this.places.placeUnderLock(
        cards.length + this.heldElsewhere,
        ({ held, queue }) => {
          const elsewhere = [...held].filter((uuid) => !schedulable.has(uuid)).length;
          if (elsewhere > this.heldElsewhere) again = true; // the bound was too small: read again
          this.heldElsewhere = elsewhere;
          const snapshot = cards.map((c) => ({ nodeId: c.nodeId, uuid: c.uuid, name: c.name, busy: held.has(c.uuid) }));
          const names = new Map(cards.map((c) => [c.uuid, c.name]));
          return plan({ cards: snapshot, queue }).placements.map((p) => ({ ...p, gpuName: names.get(p.gpuUuid)! }));
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
    // Some planned jobs were cancelled meanwhile (their cards are still free), or the read was short.
    if (again || outcome.assigned.length < outcome.planned) void this.schedule();
    for (const job of outcome.assigned) this.dispatch(job);
  }

  private dispatch(job: AssignedJob): void {
    this.dispatching.add(job.id);
    const params: RunJobParams = { jobId: job.id, gpuUuid: job.gpu_uuid, command: job.command, containerImage: job.container_image };
    this.nodes
      .run(job.node_id, params)
      .then(
        () => this.acks.push(job.id),
        (err) => this.dispatchFailed(job, err),
      )
      .catch((err) => this.logger.warn(`Dispatch of job ${job.id} not recorded: ${(err as Error).message}`))
      .finally(() => this.dispatching.delete(job.id));
  }

  /** The nodes accepted these jobs: they run now. One cancelled meanwhile is stopped on its node. */
  private async confirmStarted(ids: string[]): Promise<boolean[]> {
    const moved = await this.repo.markRunning(ids, this.clock.now());
    const late = ids.filter((id) => !moved.has(id));
    if (late.length) {
      for (const job of await this.repo.cancelled(late)) void this.stopOnNode(job.id, job.node_id);
    }
    return ids.map((id) => moved.has(id));
  }

  private async dispatchFailed(job: AssignedJob, err: unknown): Promise<boolean> {
    const message = (err as Error).message;
    if (isPermanentRejection(err)) {
      this.logger.warn(`GPU node ${job.node_id} refused job ${job.id}: ${message}`);
      await this.repo.failPlacement(job.id, job.node_id, `The GPU node refused the job: ${message}`, this.clock.now());
    } else {
      // Unreachable or busy: no more placements there until it is heard from again.
      this.logger.warn(`Could not hand job ${job.id} to GPU node ${job.node_id} (${message}); it goes back to the queue`);
      this.view.suspend(job.node_id);
      await this.repo.unplace([job.id], job.node_id);
    }
    void this.schedule();
    return false;
  }

  // --- what nodes tell us ---

  async heartbeat(hb: NodeHeartbeat): Promise<void> {
    const { changed } = this.view.heard(hb, this.clock.now().getTime());
    if (changed) void this.schedule();
    if (hb.runningJobIds.length) await this.reconcile(hb);
  }

  /** The node runs jobs we consider ended, unknown or placed elsewhere: stop them there. */
  private async reconcile(hb: NodeHeartbeat): Promise<void> {
    const rows = await this.repo.placements(hb.runningJobIds.filter((id) => UUID.test(id)));
    const byId = new Map(rows.map((r) => [r.id, r]));
    const confirmed: string[] = [];
    for (const jobId of hb.runningJobIds) {
      const row = byId.get(jobId);
      if (row && row.node_id === hb.nodeId && row.status === "assigned") confirmed.push(jobId);
      else if (!row || row.node_id !== hb.nodeId || isTerminal(row.status)) void this.stopOnNode(jobId, hb.nodeId);
    }
    if (confirmed.length) await this.repo.markRunning(confirmed, this.clock.now());
  }

  /** Applies one job event (batched with others); repeated, late and stale events change nothing. */
  applyEvent(event: JobEvent): Promise<void> {
    return this.events.push(event);
  }

  /**
   * Applies a batch of events: one read, the pure decisions (a job's events in arrival order),
   * one compare-and-set write; jobs that changed meanwhile are decided again.
   */
  private async applyEvents(batch: JobEvent[]): Promise<void[]> {
    let pending = batch;
    let freed = false;
    for (let attempt = 0; attempt < CAS_ATTEMPTS && pending.length; attempt++) {
      const states = await this.repo.states([...new Set(pending.map((e) => e.jobId))]);
      const decided = new Map<string, { seen: JobState; now: JobState; patch: JobPatch }>();
      for (const event of pending) {
        const entry = decided.get(event.jobId);
        const current = entry?.now ?? states.get(event.jobId);
        if (!current) {
          if (event.type === "started") void this.stopOnNode(event.jobId, event.nodeId); // a job this cluster does not know
          continue;
        }
        if (current.nodeId !== event.nodeId)
          this.logger.warn(`Ignored job event ${event.type} of ${event.jobId} from ${event.nodeId}: the job is not on that node`);
        const outcome = applyJobEvent(current, event);
        if (outcome.cancelOnNode) void this.stopOnNode(event.jobId, event.nodeId);
        if (!outcome.patch) continue;
        decided.set(event.jobId, {
          seen: entry?.seen ?? current,
          now: { ...current, ...outcome.patch },
          patch: { ...entry?.patch, ...outcome.patch },
        });
      }
      const updates = [...decided].map(([id, d]) => ({ id, seen: d.seen, patch: d.patch }));
      const written = await this.writeIsolated(updates);
      for (const u of updates) if (written.has(u.id) && u.patch.holding === false) freed = true;
      pending = pending.filter((e) => decided.has(e.jobId) && !written.has(e.jobId));
    }
    if (freed) void this.schedule();
    if (pending.length) throw new Error(`Jobs kept changing while applying their events: ${[...new Set(pending.map((e) => e.jobId))].join(", ")}`);
    return batch.map(() => undefined);
  }

  /**
   * Writes the batch in one statement; if the database refuses its data, each update alone, and
   * one still refused falls back to failing its job and freeing the card (a report that cannot
   * be stored must never leave a card busy). Other errors (database down) propagate: redelivery.
   */
  private async writeIsolated(updates: Array<{ id: string; seen: JobState; patch: JobPatch }>): Promise<Set<string>> {
    try {
      return await this.repo.compareAndSet(updates);
    } catch (err) {
      if (!isDataError(err)) throw err;
      const written = new Set<string>();
      for (const update of updates) {
        try {
          if ((await this.repo.compareAndSet([update])).has(update.id)) written.add(update.id);
        } catch (single) {
          if (!isDataError(single)) throw single;
          this.logger.warn(`Job ${update.id}: event not storable (${(single as Error).message}); failing the job and freeing its card`);
          await this.repo.failUnstorable(update.id, update.seen.nodeId ?? "", UNSTORABLE_EVENT_MESSAGE, this.clock.now());
          written.add(update.id);
          void this.schedule();
        }
      }
      return written;
    }
  }

  /**
   * The last delivery of an event failed too: rather than leave its card busy until node loss,
   * a terminal event fails its job (if still on that node) and frees the card. Throws only if
   * even that write fails (the database is down): the event then goes to the dead-letter stream.
   */
  async giveUpOnEvent(event: JobEvent, err: unknown): Promise<void> {
    this.logger.error(`Job event ${event.type} of ${event.jobId} could not be applied after its retries: ${(err as Error).message}`);
    if (event.type === "started") return; // nothing held on its account beyond what the heartbeat shows
    if (await this.repo.failUnstorable(event.jobId, event.nodeId, UNSTORABLE_EVENT_MESSAGE, this.clock.now())) void this.schedule();
  }

  /** Asks the node to stop a job; once it answers, the card is free (if the job has ended). Never throws. */
  private async stopOnNode(jobId: string, nodeId: string, releaseIfNotStopped = true): Promise<void> {
    let stopped: boolean;
    try {
      ({ stopped } = await this.nodes.cancel(nodeId, jobId));
    } catch (err) {
      // Unreachable: node loss or the housekeeping sweep frees the card later.
      this.logger.debug(`Could not stop job ${jobId} on ${nodeId}: ${(err as Error).message}`);
      return;
    }
    if (!(stopped || releaseIfNotStopped) || !UUID.test(jobId)) return;
    try {
      if (await this.repo.release(jobId, nodeId)) void this.schedule();
    } catch (err) {
      this.logger.warn(`Card of job ${jobId} not freed yet (the sweep retries): ${(err as Error).message}`);
    }
  }

  // --- clients ---

  /** Cancels a queued, placed or running job; returns false when it had already finished. */
  async cancel(row: JobRow): Promise<boolean> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const state = (await this.repo.states([row.id])).get(row.id)!;
      const outcome = cancelJob(state, this.clock.now());
      if (!outcome.ok) return false;
      if ((await this.repo.compareAndSet([{ id: row.id, seen: state, patch: outcome.patch }])).has(row.id)) {
        if (outcome.stopOnNode) {
          // A placed job whose node has not got it yet keeps its card until the run call settles.
          await this.stopOnNode(row.id, state.nodeId!, state.status === "running");
        }
        return true;
      }
    }
    throw new Error(`Job ${row.id} kept changing while being cancelled`);
  }

  // --- housekeeping (every tick, on every replica; every step is idempotent) ---

  async tick(): Promise<void> {
    if (this.ticking || this.stopped) return;
    this.ticking = true;
    try {
      await this.housekeeping();
    } finally {
      this.ticking = false;
    }
  }

  private async housekeeping(): Promise<void> {
    const now = this.clock.now();
    const nowMs = now.getTime();
    const lost = new Set(this.view.silent(nowMs, this.settings.nodeTimeoutMs));
    for (const id of this.view.unheard(await this.repo.nodesHoldingCards(), nowMs, this.settings.nodeTimeoutMs)) lost.add(id);
    for (const nodeId of lost) await this.nodeLost(nodeId, now);

    // Placements the node never confirmed (this replica or another one died while handing them over).
    for (const job of await this.repo.staleAssigned(new Date(nowMs - 2 * this.settings.dispatchTimeoutMs))) {
      if (this.dispatching.has(job.id)) continue;
      if (this.view.node(job.node_id)?.runningJobIds.has(job.id)) await this.repo.markRunning([job.id], now);
      else if (await this.repo.unplace([job.id], job.node_id)) this.logger.warn(`Job ${job.id} was never confirmed by ${job.node_id}; back to the queue`);
    }
    // Running jobs their live node stopped listing, with no report for a long while: the node
    // restarted and lost them (a report still on its way gets plenty of time first).
    const unreported = new Map<string, number>();
    for (const job of await this.repo.running()) {
      const node = this.view.node(job.node_id);
      if (!node || node.runningJobIds.has(job.id) || this.dispatching.has(job.id)) continue;
      const since = this.unreported.get(job.id) ?? nowMs;
      unreported.set(job.id, since);
      if (nowMs - since < UNREPORTED_FACTOR * this.settings.nodeTimeoutMs) continue;
      const message = `GPU node ${job.node_id} no longer runs the job and never reported its end (the node restarted?)`;
      if (await this.repo.failRunning(job.id, job.node_id, message, now)) this.logger.warn(`Job ${job.id}: ${message}`);
    }
    this.unreported = unreported;
    // Ended jobs whose node never confirmed the card free.
    for (const job of await this.repo.staleHolding(new Date(nowMs - this.settings.dispatchTimeoutMs))) {
      if (this.view.has(job.node_id)) void this.stopOnNode(job.id, job.node_id);
    }
    await this.schedule();
  }

  private async nodeLost(nodeId: string, now: Date): Promise<void> {
    this.view.remove(nodeId);
    const seconds = this.settings.nodeTimeoutMs / 1000;
    const outcome = await this.repo.nodeLost(nodeId, `GPU node ${nodeId} was lost (no heartbeat for ${seconds} s)`, now);
    if (outcome.failed || outcome.requeued || outcome.released)
      this.logger.warn(
        `GPU node ${nodeId} lost: ${outcome.failed} running job(s) failed, ${outcome.requeued} placement(s) back in the queue`,
      );
    else this.logger.info(`GPU node ${nodeId} left the cluster`);
  }
}
