/**
 * The connections to each ready replica a process knows (issue 29): per replica, an agent that
 * tunnels through its node (tunnel.ts), the provider adapter speaking OpenAI's API over it, and
 * the requests in flight there (what "fewest in flight" and scaling up read).
 */
import { OpenAiProvider } from "../providers/openai";
import { type ServeCall, ReplicaAgent } from "./tunnel";
import { DEPLOYMENT_PROVIDER } from "./contract";

export type ReplicaLink = { jobId: string; nodeId: string; agent: ReplicaAgent; provider: OpenAiProvider };

export class ReplicaLinks {
  private readonly links = new Map<string, ReplicaLink>();

  /** `call(nodeId, jobId)`: the serve call of that replica on its node. */
  constructor(private readonly call: (nodeId: string, jobId: string) => ServeCall) {}

  /** The replica's link (made on first use; a replica that moved to another node gets a new one). */
  get(jobId: string, nodeId: string): ReplicaLink {
    let link = this.links.get(jobId);
    if (!link || link.nodeId !== nodeId) {
      const agent = new ReplicaAgent(this.call(nodeId, jobId));
      link = { jobId, nodeId, agent, provider: new OpenAiProvider(DEPLOYMENT_PROVIDER, "http://replica/v1", undefined, agent) };
      this.links.set(jobId, link);
    }
    return link;
  }

  inflight(jobId: string): number {
    return this.links.get(jobId)?.agent.inflight ?? 0;
  }

  drop(jobId: string): void {
    this.links.get(jobId)?.agent.destroy();
    this.links.delete(jobId);
  }

  clear(): void {
    for (const id of [...this.links.keys()]) this.drop(id);
  }
}
