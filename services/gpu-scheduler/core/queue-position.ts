/**
 * The 1-based place a queued job would start at, for the API: the arithmetic of `walkFair`'s
 * fair-share order (placement.ts) with every job starting in turn, without running a plan.
 */

/** One account in the queue, for `queuePositions`: its standing and how many jobs it has queued (counting may stop at what matters). */
export type QueueAccount = { clientId: string; usage: number; held: number; weight: number; queued: number };

/** Share of an account before it starts its `i`-th queued job (0-based), as `walkFair` compares them. */
export const shareBefore = (a: Pick<QueueAccount, "usage" | "held" | "weight">, i: number) => (a.usage + a.held + i) / a.weight;

/**
 * How many of `b`'s queued jobs `walkFair` visits before a job of account `aId` whose account's
 * share is then `share`, if every visited job starts: those with a smaller share, or an equal one
 * and a smaller account id. `b.queued` may be a lower bound no smaller than the answer's cap.
 */
export function jobsAhead(b: QueueAccount, share: number, aId: string): number {
  const x = share * b.weight - b.usage - b.held; // job i is ahead when i < x (or i <= x on a tie won by b)
  const ahead = b.clientId < aId ? Math.floor(x + 1e-9) + 1 : Math.ceil(x - 1e-9);
  return Math.max(0, Math.min(b.queued, ahead));
}

/**
 * The 1-based place of a queued job in the order the scheduler would start the queue now: the
 * fair-share order of `walkFair` with every job starting in turn (types and running limits are not
 * foreseen). `ahead`: the jobs of its own account before it (priority, then age).
 */
export function queuePosition(job: { clientId: string; ahead: number }, accounts: QueueAccount[]): number {
  const own = accounts.find((a) => a.clientId === job.clientId) ?? { clientId: job.clientId, usage: 0, held: 0, weight: 1, queued: 0 };
  const share = shareBefore(own, job.ahead);
  let position = 1 + job.ahead;
  for (const b of accounts) if (b.clientId !== job.clientId) position += jobsAhead(b, share, job.clientId);
  return position;
}
