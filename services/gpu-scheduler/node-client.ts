/** The scheduler's calls to one gpu-node, over the broker (`{ nodeID }` targets that node). */
import type { ServiceBroker } from "moleculer";
import type { LogsPage, RunJobParams } from "../../lib/gpu-protocol";
import type { NodeLogs } from "./job-logs";
import type { NodeClient } from "./ports";

export class BrokerNodeClient implements NodeClient, NodeLogs {
  constructor(
    private readonly broker: ServiceBroker,
    private readonly timeoutMs: number,
  ) {}

  async run(nodeId: string, params: RunJobParams): Promise<void> {
    await this.broker.call("gpu-node.run", params, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  cancel(nodeId: string, jobId: string): Promise<{ stopped: boolean }> {
    return this.broker.call("gpu-node.cancel", { jobId }, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  /** One page of the job's log file on its node (raw bytes, base64; a bus message stays small). */
  logPage(nodeId: string, jobId: string, offset: number, attempt?: number): Promise<LogsPage> {
    return this.broker.call("gpu-node.logs", { jobId, offset, ...(attempt && attempt > 1 && { attempt }) }, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  /** One page of the tar of the job's /out kept on its node. */
  artifactsPage(nodeId: string, jobId: string, offset: number): Promise<LogsPage> {
    return this.broker.call("gpu-node.artifacts", { jobId, offset }, { nodeID: nodeId, timeout: this.timeoutMs });
  }
}
