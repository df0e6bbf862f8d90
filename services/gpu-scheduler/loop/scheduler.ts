/**
 * The scheduler shell, composed of three parts with their decisions pure: the placement loop
 * (placement-loop.ts), the event applier (event-applier.ts) and housekeeping (housekeeping.ts).
 * Every job change goes through a pure transition (transitions.ts) written by compare-and-set
 * (job-writer.ts). Its I/O sits behind narrow dependencies (the repositories, a node client, a
 * clock) so the service file only wires broker events to it.
 */
import type { LoggerInstance } from "moleculer";
import type { JobEvent, NodeHeartbeat } from "../../../lib/gpu-protocol";
import { CardVetting } from "./card-vetting";
import { ClusterView } from "../core/cluster-view";
import { EventApplier, EventStore } from "./event-applier";
import { HeartbeatInbox } from "./heartbeat-inbox";
import { Housekeeping, HousekeepingStore, LostNodeBook } from "./housekeeping";
import type { JobRow } from "../store/job-row";
import type { JobsRepository } from "../store/jobs.repository";
import { CAS_ATTEMPTS, JobWriter } from "./job-writer";
import { KnownStates } from "./known-states";
import { NodeStopper } from "./node-stopper";
import type { AccountLimits } from "../api/account-limits";
import { matchingNames } from "../core/gpu-type";
import type { Waiting } from "../core/placement";
import { PlacementLoop, PlacementStore } from "./placement-loop";
import type { PlatformGrants } from "./platform-grants";
import type { Clock, NodeClient, SchedulerTimings } from "./ports";
import { cancelJob, cancelPatch } from "../core/transitions";
import { onCard } from "../core/job-state";
import type { HeldCard, PinnedCard } from "../core/node-cards";

/** `uuid (name, reason)` of each held card, for the log. */
const heldList = (held: HeldCard[]) => held.map((c) => `${c.uuid} (${c.name}, ${c.reason})`).join(", ");

export type { Clock, NodeClient } from "./ports";

export class Scheduler {
  readonly view: ClusterView;
  private readonly writer: JobWriter;
  private readonly stopper: NodeStopper;
  private readonly placement: PlacementLoop;
  private readonly events: EventApplier;
  private readonly housekeeping: Housekeeping;
  private readonly logger: LoggerInstance;
  /** Heartbeats' database work, coalesced per node (a flooding node cannot queue up queries). */
  readonly heartbeats: HeartbeatInbox;
  private stopped = false;
  private ticking = false;

  constructor(
    private readonly repo: EventStore & HousekeepingStore & Pick<JobsRepository, "cancelUnfinished">,
    places: PlacementStore,
    nodes: NodeClient,
    private readonly clock: Clock,
    logger: LoggerInstance,
    private readonly timings: SchedulerTimings,
    limits?: AccountLimits,
    /** Where node losses are recorded for operators (absent: nowhere). */
    lostNodes?: LostNodeBook,
    /** Which announced cards take jobs (absent: all of them). */
    readonly vetting = new CardVetting(undefined, new Map()),
    /** Makes the credentials of jobs with platformAccess at dispatch (absent: none). */
    grants?: Pick<PlatformGrants, "grant">,
  ) {
    this.logger = logger;
    this.view = new ClusterView(clock.now().getTime());
    const freed = () => void this.schedule();
    this.writer = new JobWriter(repo);
    this.stopper = new NodeStopper(nodes, this.writer, freed, logger);
    const known = new KnownStates();
    this.placement = new PlacementLoop(places, this.writer, this.view, nodes, this.stopper, clock, logger, limits, known, grants);
    this.events = new EventApplier(repo, this.writer, this.stopper, clock, logger, freed, timings.retryBackoffS, known);
    this.heartbeats = new HeartbeatInbox(
      (hb) => this.events.reconcile(hb),
      timings.reconcileIntervalMs ?? 0,
      () => clock.now().getTime(),
    );
    this.housekeeping = new Housekeeping(
      repo,
      this.writer,
      this.view,
      this.stopper,
      (id) => this.placement.isDispatching(id),
      clock,
      logger,
      timings,
      lostNodes,
    );
  }

  /**
   * Requests a placement pass; resolves once a pass that saw this request has finished.
   * `newJob`: the caller just queued a job (the pass need not check that one waits).
   */
  schedule(opts: { newJob?: boolean } = {}): Promise<void> {
    return this.placement.schedule(opts);
  }

  /** Why queued jobs wait, as the last placement pass saw them (jobId → reason). */
  get waiting(): ReadonlyMap<string, Waiting> {
    return this.placement.waiting;
  }

  /**
   * Why a queued job waits: the last pass's reason, or, for a job that pass did not read (it reads
   * the first jobs of each account and type, as many as there may be free cards), what the cards
   * known now say. In memory: no query.
   */
  waitingFor(jobId: string, gpuType: string | null, gpuCount = 1): Waiting {
    const known = this.placement.waiting.get(jobId);
    if (known) return known;
    const names = this.view.cardNames();
    if (!names.length) return { jobId, reason: "NO_GPUS" };
    const needed = gpuCount > 1 ? { needed: gpuCount } : {};
    if (!matchingNames(names, gpuType).length) return { jobId, reason: "NO_MATCHING_GPU", ...needed };
    return { jobId, reason: gpuCount > this.view.mostCardsOnOneNode(gpuType) ? "NO_NODE_BIG_ENOUGH" : "MATCHING_GPUS_BUSY", ...needed };
  }

  /** No new passes; waits for the pass, event and confirmation batches under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.heartbeats.close();
    await Promise.all([this.placement.stop(), this.events.idle(), this.heartbeats.idle()]);
  }

  /** Whether a job may ask for `gpuType`: some card matches, or the cluster is not fully known yet. */
  warmingUp(): boolean {
    return this.clock.now().getTime() - this.view.sinceMs < this.timings.warmUpMs;
  }

  // --- what nodes tell us ---

  /** The node is heard at once (its liveness never waits on the database); its jobs are reconciled in turn. */
  async heartbeat(hb: NodeHeartbeat): Promise<void> {
    // The node is heard whatever the database says; its cards only as far as its pins are known.
    await this.vetting.refresh(hb, this.clock.now()).catch((err) => this.logger.warn(`Cards of ${hb.nodeId} not vetted: ${(err as Error).message}`));
    const standing = this.vetting.standing(hb.nodeId, hb.cards);
    const { changed } = this.view.heard(hb, this.clock.now().getTime(), standing);
    if (changed && standing.held.length)
      this.logger.warn(`GPU node ${hb.nodeId} announces ${standing.held.length} card(s) no job goes to: ${heldList(standing.held)}`);
    if (changed) void this.schedule();
    if (hb.runningJobIds.length) await this.heartbeats.push(hb);
  }

  /** Applies one job event (batched with others); repeated, late and stale events change nothing. */
  applyEvent(event: JobEvent): Promise<void> {
    return this.events.apply(event);
  }

  /** The last delivery of an event failed too (see EventApplier.giveUp). */
  giveUpOnEvent(event: JobEvent, err: unknown): Promise<void> {
    return this.events.giveUp(event, err);
  }

  /** An administrator accepted these pending cards of a node heard now (admin-actions.ts). */
  async acceptCards(nodeId: string, cards: PinnedCard[], by: string): Promise<void> {
    await this.vetting.accept(nodeId, cards, by, this.clock.now());
    const node = this.view.node(nodeId);
    if (node) this.view.restand(nodeId, this.vetting.standing(nodeId, node.announced));
    void this.schedule();
  }

  // --- clients ---

  /** Cancels a queued, placed or running job; returns false when it had already finished. `reason`: its statusReason (an operator's cancel). */
  async cancel(row: Pick<JobRow, "id">, reason?: string): Promise<boolean> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const state = (await this.repo.states([row.id])).get(row.id);
      // Archived meanwhile (job-history.ts): it ended long ago.
      if (!state) return false;
      const outcome = cancelJob(state, this.clock.now(), reason);
      if (!outcome.ok) return false;
      if ((await this.repo.compareAndSet([{ id: row.id, seen: state, patch: outcome.patch }])).has(row.id)) {
        if (outcome.stopOnNode) {
          // A placed job whose node has not got it yet keeps its card until the run call settles.
          await this.stopper.stop(row.id, state.nodeId!, state.status === "running");
        }
        return true;
      }
    }
    throw new Error(`Job ${row.id} kept changing while being cancelled`);
  }

  /**
   * Cancels every job of the array not finished yet, in one statement (the state machine's
   * `cancelPatch`, JobsRepository.cancelUnfinished); those on a card are stopped on their node.
   * Returns how many were cancelled here.
   */
  async cancelArray(arrayId: string, reason: string): Promise<number> {
    const written = await this.repo.cancelUnfinished(arrayId, cancelPatch(this.clock.now(), reason));
    for (const job of written)
      if (job.node_id && job.seen_status && onCard(job.seen_status)) void this.stopper.stop(job.id, job.node_id, job.seen_status === "running");
    return written.length;
  }

  // --- housekeeping ---

  async tick(): Promise<void> {
    if (this.ticking || this.stopped) return;
    this.ticking = true;
    try {
      await this.housekeeping.run();
      await this.schedule();
    } finally {
      this.ticking = false;
    }
  }
}
