/**
 * Resolves waiting jobs (`dependsOn`, issue 30): when a job with dependants ends (the
 * compare-and-set that ended it says so: JobsRepository.dependantsDue), its dependants' conditions
 * are judged (core/dependencies.ts) and their waiting jobs released to the queue or cancelled,
 * through the state machine (transitions.ts). A cancel ends jobs that may have dependants in turn:
 * their compare-and-set calls back here, so a failure travels down a chain. A sweep over the
 * waiting jobs (each housekeeping tick, a page at a time) catches what a crash or a race between
 * a submission and its dependency's end left waiting.
 */
import type { LoggerInstance } from "moleculer";
import { judgeDependencies, type DependencyVerdict } from "../core/dependencies";
import { cancelForDependency, releaseWaiting, stillWaiting } from "../core/transitions";
import type { DependenciesRepository } from "../store/dependencies.repository";
import type { JobWriter } from "./job-writer";
import type { Clock } from "./ports";

/** Waiting jobs written per compare-and-set. */
const CHUNK = 1000;
/** Waiting jobs looked at per housekeeping tick. */
const SWEEP_PAGE = 500;

export class DependencyResolver {
  /** Where the sweep goes on (the seq of the last waiting job it looked at). */
  private cursor = 0;

  constructor(
    private readonly deps: Pick<DependenciesRepository, "statesOf" | "dependantsOf" | "waitingOf" | "waitingPage">,
    private readonly writer: Pick<JobWriter, "applyTo">,
    private readonly clock: Clock,
    /** Jobs were released to the queue: a placement pass may start them. */
    private readonly onReleased: () => void,
    private readonly logger: LoggerInstance,
  ) {}

  /** These jobs ended with dependants: resolve them now (after the commit; the sweep catches up on an error). */
  ended(jobIds: string[]): void {
    this.deps
      .dependantsOf(jobIds)
      .then((dependants) => this.resolve(dependants, true))
      .catch((err) => this.logger.warn(`Dependants of ${jobIds.length} ended job(s) not resolved yet (the sweep retries): ${(err as Error).message}`));
  }

  /** One page of the waiting jobs, in age order, wrapping around. */
  async sweep(): Promise<void> {
    const page = await this.deps.waitingPage(this.cursor, SWEEP_PAGE);
    this.cursor = page.lastSeq ?? 0;
    if (page.keys.length) await this.resolve(page.keys);
  }

  /**
   * Judges these dependants (jobs or arrays) and writes the decided ones; returns how many jobs
   * changed. `refresh`: a dependency of theirs just ended, so those still waiting say what they wait for now.
   */
  async resolve(dependants: string[], refresh = false): Promise<number> {
    if (!dependants.length) return 0;
    const verdicts = new Map<string, DependencyVerdict>();
    for (const [dependant, states] of await this.deps.statesOf(dependants)) verdicts.set(dependant, judgeDependencies(states));
    const decided = [...verdicts].filter(([, v]) => refresh || v.kind !== "wait").map(([d]) => d);
    if (!decided.length) return 0;
    // A job still waiting that already says so is left alone (no write per end of a job of a big array).
    const waiting = (await this.deps.waitingOf(decided)).filter((w) => {
      const verdict = verdicts.get(w.dependant)!;
      return verdict.kind !== "wait" || verdict.reason !== w.reason;
    });
    const verdictOf = new Map(waiting.map((w) => [w.id, verdicts.get(w.dependant)!]));
    let changed = 0;
    let released = false;
    for (let i = 0; i < waiting.length; i += CHUNK) {
      const now = this.clock.now();
      const { written } = await this.writer.applyTo(
        waiting.slice(i, i + CHUNK).map((w) => w.id),
        (job, id) => {
          const verdict = verdictOf.get(id)!;
          if (verdict.kind === "ready") return releaseWaiting(job);
          return verdict.kind === "cancel" ? cancelForDependency(job, verdict.reason, now) : stillWaiting(job, verdict.reason);
        },
      );
      for (const patch of written.values()) if (patch.status === "queued") released = true;
      changed += written.size;
    }
    if (released) this.onReleased();
    return changed;
  }
}
