/** Asks a gpu-node to stop a job, then frees the job's card once the node says it is gone. */
import type { LoggerInstance } from "moleculer";
import { isUuid } from "../../../lib/uuid";
import type { JobWriter } from "./job-writer";
import type { NodeClient } from "./ports";
import { release } from "../core/transitions";

export class NodeStopper {
  constructor(
    private readonly nodes: Pick<NodeClient, "cancel">,
    private readonly writer: JobWriter,
    /** A card was freed: another placement pass may use it. */
    private readonly onFreed: () => void,
    private readonly logger: LoggerInstance,
  ) {}

  /** `<node> <job>` stops under way: a node repeating a job in its heartbeats gets one cancel call at a time. */
  private readonly inFlight = new Set<string>();

  /** Once the node answers, the card is free (if the job has ended). Never throws. */
  async stop(jobId: string, nodeId: string, releaseIfNotStopped = true, preempt = false): Promise<void> {
    const key = `${nodeId} ${jobId}`;
    if (this.inFlight.has(key)) return;
    let stopped: boolean;
    this.inFlight.add(key);
    try {
      ({ stopped } = await this.nodes.cancel(nodeId, jobId, preempt));
    } catch (err) {
      // Unreachable: node loss or the housekeeping sweep frees the card later.
      this.logger.debug(`Could not stop job ${jobId} on ${nodeId}: ${(err as Error).message}`);
      return;
    } finally {
      this.inFlight.delete(key);
    }
    if (!(stopped || releaseIfNotStopped) || !isUuid(jobId)) return;
    try {
      if (await this.writer.applyOne(jobId, (job) => release(job, nodeId))) this.onFreed();
    } catch (err) {
      this.logger.warn(`Card of job ${jobId} not freed yet (the sweep retries): ${(err as Error).message}`);
    }
  }
}
