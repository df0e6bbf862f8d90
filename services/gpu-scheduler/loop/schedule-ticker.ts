/**
 * Runs the due ticks of schedules (issue 30) on the housekeeping timer, on every replica: each
 * claims its ticks in PostgreSQL (schedules.repository.ts `claimDue`), decides each one
 * (core/schedule-tick.ts) and inserts its job in the claim's transaction, so a tick makes one job
 * across replicas and restarts. `replace` cancels the last jobs of the due ticks first, outside
 * the claim (through the state machine, as a client's cancel): the claim then finds them finished
 * and runs. A tick's inserts take the accounts' locks in account order, as the batched inserts do.
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { type JobRequest, storedJob } from "../../../lib/job-spec";
import { parseCron } from "../core/cron";
import { decideTick } from "../core/schedule-tick";
import type { JobsRepository } from "../store/jobs.repository";
import type { DueSchedule, SchedulesRepository } from "../store/schedules.repository";
import type { Clock } from "./ports";

/** Ticks claimed per transaction (a backlog of due schedules is worked through on the next ticks). */
const CLAIM_LIMIT = 50;
/** The statusReason of a job a `replace` schedule's next run cancelled. */
export const REPLACED_REASON = "replaced by the next run of its schedule";

export type TickPorts = {
  schedules: Pick<SchedulesRepository, "claimDue" | "advance" | "markJob" | "lastJobsToReplace">;
  jobs: Pick<JobsRepository, "admitAndInsert">;
  /** The account's queued-jobs limit. */
  queuedLimit(clientId: string): Promise<number>;
  /** Cancels a job (false: it had finished). */
  cancel(jobId: string, reason: string): Promise<boolean>;
  /** Jobs were queued: a placement pass. */
  queued(): void;
  clock: Clock;
  defaultTimeoutS: number;
};

export class ScheduleTicker {
  private running = false;

  constructor(
    private readonly ports: TickPorts,
    private readonly logger: LoggerInstance,
  ) {}

  /** Runs what is due now; returns the jobs created. One run at a time per replica. */
  async tick(): Promise<string[]> {
    if (this.running) return [];
    this.running = true;
    try {
      const now = this.ports.clock.now();
      for (const jobId of await this.ports.schedules.lastJobsToReplace(now, CLAIM_LIMIT)) await this.ports.cancel(jobId, REPLACED_REASON);
      const created = await this.ports.schedules.claimDue(now, CLAIM_LIMIT, async (due, tx) => {
        const made: string[] = [];
        for (const schedule of [...due].sort((a, b) => (a.client_id < b.client_id ? -1 : a.client_id > b.client_id ? 1 : 0))) {
          const jobId = await this.runOne(schedule, now, tx);
          if (jobId) made.push(jobId);
        }
        return made;
      });
      if (created.length) this.ports.queued();
      return created;
    } finally {
      this.running = false;
    }
  }

  private async runOne(schedule: DueSchedule, now: Date, tx: Parameters<TickPorts["schedules"]["advance"]>[0]): Promise<string | null> {
    const parsed = parseCron(schedule.cron);
    if (!parsed.ok) {
      // Checked when stored: only a hand-edited row gets here. It stops ticking.
      this.logger.warn(`Schedule ${schedule.id} has a bad cron expression (${parsed.message}); it no longer runs`);
      await this.ports.schedules.advance(tx, schedule.id, null, now, null);
      return null;
    }
    const decision = decideTick(
      { concurrency: schedule.concurrency, cron: parsed.cron, timezone: schedule.timezone, lastUnfinished: schedule.last_unfinished },
      now,
    );
    if (!decision.run) {
      await this.ports.schedules.advance(tx, schedule.id, decision.next, now, null);
      return null;
    }
    const request: JobRequest = { ...schedule.job, ...(schedule.env && { env: schedule.env }) };
    const job = {
      id: randomUUID(),
      clientId: schedule.client_id,
      spec: storedJob(request, this.ports.defaultTimeoutS),
      ...(schedule.env && { env: schedule.env }),
    };
    const limit = await this.ports.queuedLimit(schedule.client_id);
    const { refused } = await this.ports.jobs.admitAndInsert([job], now, () => limit, tx);
    if (refused.has(job.id)) {
      // The account's queue is full: this tick is skipped like a forbidden one.
      this.logger.info(`Schedule ${schedule.id}: tick skipped, the account has ${limit} queued jobs`);
      await this.ports.schedules.advance(tx, schedule.id, decision.next, now, null);
      return null;
    }
    await this.ports.schedules.markJob(tx, job.id, schedule.id);
    await this.ports.schedules.advance(tx, schedule.id, decision.next, now, job.id);
    return job.id;
  }
}
