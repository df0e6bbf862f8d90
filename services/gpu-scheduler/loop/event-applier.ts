/**
 * What gpu-nodes tell the scheduler about jobs: their events (batched: one read, the pure
 * decisions of transitions.ts, one compare-and-set write) and the jobs their heartbeats list.
 */
import type { LoggerInstance } from "moleculer";
import { isDataError } from "../../../lib/errors";
import type { JobEvent, NodeHeartbeat } from "../../../lib/gpu-protocol";
import { isUuid } from "../../../lib/uuid";
import { Batcher } from "./batcher";
import type { JobsRepository } from "../store/jobs.repository";
import { CAS_ATTEMPTS, JobStateStore, JobWriter } from "./job-writer";
import { KnownStates, patched } from "./known-states";
import type { NodeStopper } from "./node-stopper";
import type { Clock } from "./ports";
import { applyJobEvent, confirmPlacement, failUnstorable, isTerminal, JobPatch, JobState } from "../core/transitions";

/** The repository calls the applier makes (JobsRepository; an in-memory map in unit tests). */
export interface EventStore extends JobStateStore {
  placements: JobsRepository["placements"];
}

/** PostgreSQL refused the data itself (class 22: bad encoding, out of range…): retrying cannot help. */
export const UNSTORABLE_EVENT_MESSAGE = "The GPU node's report of this job could not be stored; its output is in the job's logs";

export type DecidedEvents = {
  /** Per job: the state the decisions started from, the state after them, and the patch to write. */
  decided: Map<string, { seen: JobState; now: JobState; patch: JobPatch }>;
  /** Jobs the node runs but should not (unknown, stale placement, ended here). */
  stop: Array<{ jobId: string; nodeId: string }>;
  /** Events from a node the job is not on. */
  misrouted: JobEvent[];
};

/** Decides a batch of events on the jobs' states, a job's events in arrival order, at `now`. Pure. */
export function decideEvents(events: JobEvent[], states: Map<string, JobState>, now: Date, retryBackoffS?: number): DecidedEvents {
  const out: DecidedEvents = { decided: new Map(), stop: [], misrouted: [] };
  for (const event of events) {
    const entry = out.decided.get(event.jobId);
    const current = entry?.now ?? states.get(event.jobId);
    if (!current) {
      if (event.type === "started") out.stop.push({ jobId: event.jobId, nodeId: event.nodeId }); // a job this cluster does not know
      continue;
    }
    if (current.nodeId !== event.nodeId) out.misrouted.push(event);
    const outcome = applyJobEvent(current, event, now, retryBackoffS);
    if (outcome.cancelOnNode) out.stop.push({ jobId: event.jobId, nodeId: event.nodeId });
    if (!outcome.patch) continue;
    out.decided.set(event.jobId, {
      seen: entry?.seen ?? current,
      now: { ...current, ...outcome.patch },
      patch: { ...entry?.patch, ...outcome.patch },
    });
  }
  return out;
}

/** Cancel calls one heartbeat's reconciliation may start. */
export const MAX_STOPS_PER_HEARTBEAT = 32;

/**
 * A heartbeat's running jobs against their rows: placed there and unconfirmed → confirm them;
 * unknown, placed elsewhere or ended → stop them on the node. Pure.
 */
export function reconcileHeartbeat(
  hb: Pick<NodeHeartbeat, "nodeId" | "runningJobIds">,
  rows: Array<{ id: string; status: JobState["status"]; node_id: string | null }>,
): { confirm: string[]; stop: string[] } {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const confirm: string[] = [];
  const stop: string[] = [];
  for (const jobId of hb.runningJobIds) {
    const row = byId.get(jobId);
    if (row && row.node_id === hb.nodeId && row.status === "assigned") confirm.push(jobId);
    else if (!row || row.node_id !== hb.nodeId || isTerminal(row.status)) stop.push(jobId);
  }
  return { confirm, stop };
}

export class EventApplier {
  private readonly events: Batcher<JobEvent, void>;

  constructor(
    private readonly store: EventStore,
    private readonly writer: JobWriter,
    private readonly stopper: NodeStopper,
    private readonly clock: Clock,
    private readonly logger: LoggerInstance,
    /** A card was freed: another placement pass may use it. */
    private readonly onFreed: () => void,
    /** RETRY_BACKOFF_S (absent: the default). */
    private readonly retryBackoffS?: number,
    /** The states this replica last wrote (known-states.ts): an event of such a job needs no read. */
    private readonly known = new KnownStates(),
  ) {
    this.events = new Batcher((events) => this.applyEvents(events), { maxBatch: 200, maxInFlight: 2 });
  }

  /** Applies one job event (batched with others); repeated, late and stale events change nothing. */
  apply(event: JobEvent): Promise<void> {
    return this.events.push(event);
  }

  /** Waits for the batches under way. */
  idle(): Promise<void> {
    return this.events.idle();
  }

  /** The node runs jobs we consider ended, unknown or placed elsewhere: stop them there. */
  async reconcile(hb: NodeHeartbeat): Promise<void> {
    const rows = await this.store.placements(hb.runningJobIds.filter(isUuid));
    const { confirm, stop } = reconcileHeartbeat(hb, rows);
    // The rest are stopped on later heartbeats: a node listing hundreds of unknown jobs cannot make hundreds of calls at once.
    for (const jobId of stop.slice(0, MAX_STOPS_PER_HEARTBEAT)) void this.stopper.stop(jobId, hb.nodeId);
    if (confirm.length) await this.writer.applyTo(confirm, (job) => confirmPlacement(job, hb.nodeId));
  }

  /**
   * The last delivery of an event failed too: rather than leave its card busy until node loss,
   * a terminal event fails its job (if still on that node) and frees the card. Throws only if
   * even that write fails (the database is down): the event then goes to the dead-letter stream.
   */
  async giveUp(event: JobEvent, err: unknown): Promise<void> {
    this.logger.error(`Job event ${event.type} of ${event.jobId} could not be applied after its retries: ${(err as Error).message}`);
    if (event.type === "started") return; // nothing held on its account beyond what the heartbeat shows
    if (await this.failUnstorable(event.jobId, event.nodeId)) this.onFreed();
  }

  /**
   * Applies a batch of events: one read (none for the jobs whose state this replica wrote last),
   * the pure decisions, one compare-and-set write; jobs that changed meanwhile are decided again.
   */
  private async applyEvents(batch: JobEvent[]): Promise<void[]> {
    let pending = batch;
    let freed = false;
    for (let attempt = 0; attempt < CAS_ATTEMPTS && pending.length; attempt++) {
      const ids = [...new Set(pending.map((e) => e.jobId))];
      const remembered = attempt === 0 ? this.known.get(ids) : new Map<string, JobState>();
      const unknown = ids.filter((id) => !remembered.has(id));
      let states = new Map([...remembered, ...(unknown.length ? await this.store.states(unknown) : [])]);
      let decision = decideEvents(pending, states, this.clock.now(), this.retryBackoffS);
      // Nothing acts outside the database on a remembered state: such decisions are taken again on a fresh read.
      if ([...decision.stop.map((s) => s.jobId), ...decision.misrouted.map((e) => e.jobId)].some((id) => remembered.has(id))) {
        this.known.forget(remembered.keys());
        states = await this.store.states(ids);
        decision = decideEvents(pending, states, this.clock.now(), this.retryBackoffS);
      }
      const { decided, stop, misrouted } = decision;
      for (const e of misrouted) this.logger.warn(`Ignored job event ${e.type} of ${e.jobId} from ${e.nodeId}: the job is not on that node`);
      for (const s of stop) void this.stopper.stop(s.jobId, s.nodeId);
      const updates = [...decided].map(([id, d]) => ({ id, seen: d.seen, patch: d.patch }));
      const written = await this.writeIsolated(updates);
      for (const u of updates) if (written.has(u.id) && u.patch.holding === false) freed = true;
      for (const u of updates) if (written.has(u.id)) this.known.remember(u.id, patched(u.seen, u.patch));
      this.known.forget(updates.filter((u) => !written.has(u.id)).map((u) => u.id));
      pending = pending.filter((e) => decided.has(e.jobId) && !written.has(e.jobId));
    }
    if (freed) this.onFreed();
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
      return await this.store.compareAndSet(updates);
    } catch (err) {
      if (!isDataError(err)) throw err;
      const written = new Set<string>();
      for (const update of updates) {
        try {
          if ((await this.store.compareAndSet([update])).has(update.id)) written.add(update.id);
        } catch (single) {
          if (!isDataError(single)) throw single;
          this.logger.warn(`Job ${update.id}: event not storable (${(single as Error).message}); failing the job and freeing its card`);
          await this.failUnstorable(update.id, update.seen.nodeId ?? "");
          written.add(update.id);
          this.onFreed();
        }
      }
      return written;
    }
  }

  /** A report of the job that cannot be stored: fail it if still on `nodeId`, free its card. */
  private failUnstorable(jobId: string, nodeId: string): Promise<boolean> {
    const now = this.clock.now();
    return this.writer.applyOne(jobId, (job) => failUnstorable(job, nodeId, UNSTORABLE_EVENT_MESSAGE, now));
  }
}
