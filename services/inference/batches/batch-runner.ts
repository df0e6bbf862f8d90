/**
 * Runs batches in each inference replica, every BATCH_POLL_MS and whenever a line settles: starts
 * validating batches (their lines copied from the input file), claims due lines for the free
 * slots (lines.repository.ts: BATCH_CONCURRENCY per account, never the replica's last free slot
 * while interactive requests run, and no more than BATCH_PACED_IN_FLIGHT lines in the replica while
 * interactive traffic is not idle: batch-pace.ts), runs each (batch-line.ts) and stores its outcome once,
 * and ends batches (batch-finalizer.ts). stop() claims nothing more and waits for the lines in
 * flight, so a replica stopping loses and repeats no line.
 */
import type { LoggerInstance } from "moleculer";
import { ClaimLoop } from "../../../lib/claim-loop";
import { finalizeBatches, FinalizerPorts, startBatches } from "./batch-finalizer";
import { LineDecision } from "./batch-line";
import type { ClaimedLine, LinesRepository } from "./lines.repository";

export type RunnerSettings = {
  /** BATCH_CONCURRENCY: lines of one account in flight at once in one replica. */
  perAccount: number;
  /** BATCH_MAX_IN_FLIGHT: lines in flight at once in one replica, interactive requests included. */
  maxInFlight: number;
  pollMs: number;
  /** A claimed line whose replica is gone runs again after this long (longer than any attempt with its fallbacks). */
  leaseMs: number;
};

export type RunnerPorts = FinalizerPorts & {
  lines: LinesRepository;
  /** The line's endpoint (its batch's). */
  run(line: ClaimedLine): Promise<LineDecision>;
  /** Interactive requests in flight in this replica now. */
  interactive(): number;
  /** Lines this replica may have in flight now, of `unpaced` when interactive traffic is idle (batch-pace.ts). */
  paced(unpaced: number): Promise<number>;
  /** After each tick (webhooks of batches that ended). */
  onTick?(): void;
  /** A tick moved batches (their event streams read them again). */
  onMoved?(): void;
};

export class BatchRunner extends ClaimLoop {
  constructor(
    private readonly ports: RunnerPorts,
    private readonly settings: RunnerSettings,
    logger: LoggerInstance,
  ) {
    super(settings.pollMs, logger, "Batch runner");
  }

  /** When batches were last started and ended: at most every pollMs, while lines are claimed at each settle. */
  private housekeptAt = 0;

  protected async claim(): Promise<void> {
    const housekeeping = Date.now() - this.housekeptAt >= this.settings.pollMs;
    let moved = 0;
    if (housekeeping) {
      this.housekeptAt = Date.now();
      moved += await startBatches(this.ports);
    }
    const free = (await this.ports.paced(this.settings.maxInFlight - 1 - this.ports.interactive())) - this.busy;
    if (free > 0 && !this.stopped) {
      const claimed = await this.ports.lines.claim(free, this.settings.perAccount, this.inFlight, this.settings.leaseMs);
      for (const line of claimed)
        this.launch(
          line.client_id,
          () => this.settle(line),
          (err) => `Batch ${line.batch_id} line ${line.line} not stored (it runs again): ${err.message}`,
        );
    }
    if (!housekeeping) return;
    moved += await finalizeBatches(this.ports);
    if (moved) this.ports.onMoved?.();
    this.ports.onTick?.();
  }

  private async settle(line: ClaimedLine): Promise<void> {
    const decision = await this.ports.run(line);
    if ("store" in decision) {
      if (!(await this.ports.lines.finish(line, decision.store))) this.logger.info(`Batch ${line.batch_id} line ${line.line}: result dropped (claim lost)`);
    } else await this.ports.lines.retry(line, decision.retryInMs, decision.counted);
  }
}
