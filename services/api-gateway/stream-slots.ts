/**
 * Open streams per account (GATEWAY_STREAMS_PER_ACCOUNT): each request to an action whose answer
 * is read over time (`streams` on its schema: job logs, follows, events, artifacts, streamed
 * inference) holds a slot of its account on this gateway replica from authentication until its
 * response closes, however it ends; one over the limit is 429 before any service is called. A
 * follower costs memory and a page call per chunk on every hop: without a bound, one account
 * holding thousands open starves every other account on the replica.
 */
import type { ServerResponse } from "http";
import type { ActionSchema } from "moleculer";
import { apiError } from "../../lib/errors";

/** Whether this call's answer will be a stream: always, or when its `param` is true. */
export function streamsFor(action: Pick<ActionSchema, "streams"> | undefined, params: unknown): boolean {
  const streams = action?.streams;
  if (streams === true) return true;
  if (!streams || typeof params !== "object" || params === null) return false;
  return (params as Record<string, unknown>)[streams.param] === true;
}

export class StreamSlots {
  private readonly open = new Map<string, number>();

  /** `limit`: open streams an account may hold on this replica; null: unlimited. */
  constructor(private readonly limit: number | null) {}

  /** Holds one of the account's slots until `res` closes, or throws 429 RATE_LIMITED (nothing held). */
  hold(accountId: string, res: ServerResponse): void {
    const used = this.open.get(accountId) ?? 0;
    if (this.limit !== null && used >= this.limit) {
      throw apiError(
        "RATE_LIMITED",
        `An account may have at most ${this.limit} open streams (logs, follows, events, artifacts, streamed inference) at once; close one and retry`,
        { retryAfter: 1, resource: "streams", limit: this.limit, used },
      );
    }
    // A client already gone holds nothing: its response's close has been emitted and will not be again.
    if (res.destroyed) return;
    this.open.set(accountId, used + 1);
    res.once("close", () => this.release(accountId));
  }

  /** Streams the account holds open now. */
  held(accountId: string): number {
    return this.open.get(accountId) ?? 0;
  }

  private release(accountId: string): void {
    const left = (this.open.get(accountId) ?? 1) - 1;
    if (left > 0) this.open.set(accountId, left);
    else this.open.delete(accountId);
  }
}
