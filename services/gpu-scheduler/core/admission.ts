/**
 * Admission of a batch of submissions, from each account's queued jobs counted per priority once
 * per batch (read under the account's lock, so concurrent batches of one account see each other's
 * jobs): which fit the account's queued-jobs limit, and each new job's place in its account's
 * order (priority, then age). Pure.
 */
export type Submission = { id: string; clientId: string };
/** Why a submission was refused: the account's limit and its queued jobs (QUOTA_EXCEEDED details). */
export type Refusal = { limit: number; used: number };
/** An account's queued jobs per priority (0 low … 2 high). */
export type QueuedByPriority = ReadonlyMap<number, number>;

const total = (counts: QueuedByPriority | undefined) => [...(counts?.values() ?? [])].reduce((a, b) => a + b, 0);

/** The submissions that fit their account's limit (the first ones of a batch win), and the refused ones by id. */
export function admit<S extends Submission>(
  jobs: readonly S[],
  queued: ReadonlyMap<string, QueuedByPriority>,
  limitOf: (clientId: string) => number,
): { admitted: S[]; refused: Map<string, Refusal> } {
  const used = new Map<string, number>();
  const admitted: S[] = [];
  const refused = new Map<string, Refusal>();
  for (const job of jobs) {
    const n = used.get(job.clientId) ?? total(queued.get(job.clientId));
    const limit = limitOf(job.clientId);
    if (n >= limit) refused.set(job.id, { limit, used: n });
    else {
      admitted.push(job);
      used.set(job.clientId, n + 1);
    }
  }
  return { admitted, refused };
}

/**
 * Jobs of its own account ahead of each new job: those queued before the batch with at least its
 * priority (the batch's are all younger), and those of the batch with a higher priority or an
 * equal one and a smaller `seq`.
 */
export function aheadInAccount(
  created: ReadonlyArray<Submission & { priority: number; seq: number }>,
  queued: ReadonlyMap<string, QueuedByPriority>,
): Map<string, number> {
  const ahead = new Map<string, number>();
  for (const job of created) {
    let n = 0;
    for (const [priority, count] of queued.get(job.clientId) ?? []) if (priority >= job.priority) n += count;
    for (const other of created)
      if (other.clientId === job.clientId && (other.priority > job.priority || (other.priority === job.priority && other.seq < job.seq))) n++;
    ahead.set(job.id, n);
  }
  return ahead;
}
