/** The scheduler's calls to one gpu-node, over the broker (`{ nodeID }` targets that node). */
import type { ServiceBroker } from "moleculer";
import type { FollowPage, FollowParams, LogsPage } from "../../../lib/gpu-protocol";
import type { RunJobParams } from "../../../lib/job-spec";
import type { NodeLogs } from "../streams/job-logs";
import type { FollowNodes } from "../streams/log-follow";
import type { NodeClient } from "./ports";

export class BrokerNodeClient implements NodeClient, NodeLogs, FollowNodes {
  constructor(
    private readonly broker: ServiceBroker,
    private readonly timeoutMs: number,
  ) {}

  async run(nodeId: string, params: RunJobParams): Promise<void> {
    await this.broker.call("gpu-node.run", params, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  cancel(nodeId: string, jobId: string, preempt = false): Promise<{ stopped: boolean }> {
    // A preemption waits through the node's grace period: the call may take that long too.
    return this.broker.call("gpu-node.cancel", { jobId, ...(preempt && { preempt }) }, { nodeID: nodeId, timeout: this.timeoutMs + (preempt ? 60_000 : 0) });
  }

  /** One page of the job's log file on its node (raw bytes, base64; a bus message stays small). */
  logPage(nodeId: string, jobId: string, offset: number, attempt?: number): Promise<LogsPage> {
    return this.broker.call("gpu-node.logs", { jobId, offset, ...(attempt && attempt > 1 && { attempt }) }, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  /** New output of a running attempt: the call lasts up to its `waitMs`, plus the usual allowance. */
  follow(nodeId: string, params: FollowParams): Promise<FollowPage> {
    return this.broker.call("gpu-node.follow", params, { nodeID: nodeId, timeout: params.waitMs + this.timeoutMs });
  }

  async stopFollow(nodeId: string, fid: string): Promise<void> {
    await this.broker.call("gpu-node.followStop", { fid }, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  /** One page of the tar of the job's /out kept on its node. */
  artifactsPage(nodeId: string, jobId: string, offset: number): Promise<LogsPage> {
    return this.broker.call("gpu-node.artifacts", { jobId, offset }, { nodeID: nodeId, timeout: this.timeoutMs });
  }
}
