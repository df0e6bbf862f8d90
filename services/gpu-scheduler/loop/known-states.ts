/**
 * The states this replica last wrote of the jobs it placed, so the node's events of such a job
 * (started, ended) are decided without reading the job first: one round trip less per event.
 * Safe because every write is a compare-and-set on what its decision saw (status, holding, node,
 * card): a state changed since by another writer (a cancel, another replica) makes the write miss,
 * and the job is then forgotten here, read and decided again (event-applier.ts). A decision that
 * would act outside the database on a remembered state (stop the job on a node, call an event
 * misrouted) is taken again on a fresh read first. Ended jobs are forgotten; at most `max` are kept,
 * the oldest dropped first.
 */
import { isTerminal, JobPatch, JobState } from "../core/transitions";

/** A job's state after `patch` was written on `seen` (as compareAndSet writes it). Pure. */
export function patched(seen: JobState, patch: JobPatch): JobState {
  const { notBefore: _notBefore, endedAttempt: _ended, nodeId, gpuUuid: _gpu, ...fields } = patch;
  const next: JobState = { ...seen, ...fields };
  // As a read gives them: output only as a presence mark (decisions test it for null), never the text kept.
  if (typeof next.output === "string") next.output = "";
  delete next.outputBase64; // not among the columns a read gives (job-row.ts STATE_COLUMNS)
  // A patch's nodeId: null clears the whole placement.
  return nodeId === null ? { ...next, nodeId: null, gpuUuid: null, assignedAt: null } : next;
}

export class KnownStates {
  private readonly known = new Map<string, JobState>();

  constructor(private readonly max = 10_000) {}

  get size(): number {
    return this.known.size;
  }

  /** The remembered states of those of `ids` known here. */
  get(ids: Iterable<string>): Map<string, JobState> {
    const found = new Map<string, JobState>();
    for (const id of ids) {
      const state = this.known.get(id);
      if (state) found.set(id, state);
    }
    return found;
  }

  /** What this replica just wrote of a job (an ended one is forgotten). */
  remember(id: string, state: JobState): void {
    this.known.delete(id);
    if (isTerminal(state.status)) return;
    this.known.set(id, state);
    if (this.known.size > this.max) this.known.delete(this.known.keys().next().value!);
  }

  forget(ids: Iterable<string>): void {
    for (const id of ids) this.known.delete(id);
  }
}
