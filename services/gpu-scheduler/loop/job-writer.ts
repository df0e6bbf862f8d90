/**
 * Writes the pure transitions of transitions.ts: read the jobs' states, decide on each, write the
 * patches in one compare-and-set; jobs that changed meanwhile are read and decided again.
 */
import type { JobPatch, JobState } from "../core/transitions";

/** The repository calls a transition needs (JobsRepository; an in-memory map in unit tests). */
export interface JobStateStore {
  states(ids: string[]): Promise<Map<string, JobState>>;
  compareAndSet(updates: Array<{ id: string; seen: JobState; patch: JobPatch }>): Promise<Set<string>>;
}

export const CAS_ATTEMPTS = 5;

export type Decide = (job: JobState, id: string) => JobPatch | null;

export class JobWriter {
  constructor(private readonly store: JobStateStore) {}

  /**
   * Applies `decide` to jobs whose states were just read; returns the patches written (by id) and
   * the last state seen of each job.
   */
  async apply(states: Map<string, JobState>, decide: Decide): Promise<{ written: Map<string, JobPatch>; seen: Map<string, JobState> }> {
    const written = new Map<string, JobPatch>();
    const seen = new Map(states);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const updates: Array<{ id: string; seen: JobState; patch: JobPatch }> = [];
      for (const [id, job] of states) {
        seen.set(id, job);
        const patch = decide(job, id);
        if (patch) updates.push({ id, seen: job, patch });
      }
      const done = await this.store.compareAndSet(updates);
      for (const u of updates) if (done.has(u.id)) written.set(u.id, u.patch);
      const missed = updates.filter((u) => !done.has(u.id)).map((u) => u.id);
      if (!missed.length) return { written, seen };
      states = await this.store.states(missed);
    }
    throw new Error(`Jobs kept changing while being updated: ${[...states.keys()].join(", ")}`);
  }

  /** Reads and applies `decide` to these jobs. */
  async applyTo(ids: string[], decide: Decide): Promise<{ written: Map<string, JobPatch>; seen: Map<string, JobState> }> {
    return this.apply(await this.store.states(ids), decide);
  }

  /** `apply` on one job; returns whether it changed. */
  async applyOne(id: string, decide: Decide): Promise<boolean> {
    return (await this.applyTo([id], decide)).written.has(id);
  }
}
