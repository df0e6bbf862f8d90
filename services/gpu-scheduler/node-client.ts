/** The scheduler's calls to one gpu-node, over the broker (`{ nodeID }` targets that node). */
import type { ServiceBroker } from "moleculer";
import type { RunJobParams } from "../../lib/gpu-protocol";
import type { NodeClient } from "./scheduler";

type LogsPage = { text: string; nextOffset: number | null };

/** The most output one logs request gathers from a node (its log files are capped at 64 MiB too). */
const MAX_LOG_BYTES = 64 * 1024 * 1024;

export class BrokerNodeClient implements NodeClient {
  constructor(private readonly broker: ServiceBroker, private readonly timeoutMs: number) {}

  async run(nodeId: string, params: RunJobParams): Promise<void> {
    await this.broker.call("gpu-node.run", params, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  cancel(nodeId: string, jobId: string): Promise<{ stopped: boolean }> {
    return this.broker.call("gpu-node.cancel", { jobId }, { nodeID: nodeId, timeout: this.timeoutMs });
  }

  /** The node serves output in pages (a bus message stays small): follow them to the end. */
  async logs(nodeId: string, jobId: string): Promise<string> {
    const parts: string[] = [];
    let offset: number | null = 0;
    let bytes = 0;
    while (offset !== null && bytes < MAX_LOG_BYTES) {
      const page: LogsPage = await this.broker.call("gpu-node.logs", { jobId, offset }, { nodeID: nodeId, timeout: this.timeoutMs });
      parts.push(page.text);
      bytes += Buffer.byteLength(page.text);
      offset = page.nextOffset;
    }
    return parts.join("");
  }
}
