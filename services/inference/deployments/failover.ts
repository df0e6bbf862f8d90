/**
 * A request for a deployment with more than one ready replica (issue 29): sent to the replica with
 * the fewest requests in flight and, when its node could not deliver it (the replica just ended,
 * or its node is gone: nothing of the request reached a replica), to the next one, each asked for
 * its own model id. The replica that could not be reached is reported (`unreachable`): the router
 * passes it over until the platform has heard of its end.
 */
import type { ChatRequest, Completion, Embeddings, Provider, ProviderModel, StreamChunk } from "../providers/types";
import { DEPLOYMENT_PROVIDER } from "./contract";

/** A ready replica a request may go to: its job, the model id it serves, and its adapter. */
export type Candidate = { jobId: string; modelId: string; provider: Provider };

/** Whether a failure says the request never reached its server (providers/http.ts). */
const notSent = (err: unknown) => Boolean((err as { notSent?: unknown } | null)?.notSent);

export class FailoverProvider implements Provider {
  readonly name = DEPLOYMENT_PROVIDER;

  /** `candidates`: in the order tried (at least one). */
  constructor(
    private readonly candidates: readonly Candidate[],
    private readonly unreachable: (jobId: string) => void,
  ) {}

  listModels(signal: AbortSignal): Promise<ProviderModel[]> {
    return this.candidates[0].provider.listModels(signal);
  }

  ping(signal: AbortSignal): Promise<void> {
    return this.candidates[0].provider.ping(signal);
  }

  complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    return this.each((c) => c.provider.complete({ ...request, model: c.modelId }, signal));
  }

  stream(request: ChatRequest, signal: AbortSignal): Promise<AsyncIterable<StreamChunk>> {
    return this.each((c) => c.provider.stream({ ...request, model: c.modelId }, signal));
  }

  embed(_model: string, input: string[], signal: AbortSignal): Promise<Embeddings> {
    return this.each((c) => c.provider.embed(c.modelId, input, signal));
  }

  private async each<T>(work: (candidate: Candidate) => Promise<T>): Promise<T> {
    for (let i = 0; ; i++) {
      try {
        return await work(this.candidates[i]);
      } catch (err) {
        if (!notSent(err) || i === this.candidates.length - 1) throw err;
        this.unreachable(this.candidates[i].jobId);
      }
    }
  }
}
