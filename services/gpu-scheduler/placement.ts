/**
 * The placement decision: a pure function of a snapshot (cards, queue) returning a plan. No
 * database, broker or clock here; the service reads the snapshot, calls `plan`, commits it.
 *
 * The rule, in order:
 * 1. Jobs are considered in fair-share order (`walkFair`): next comes a job of the account with the
 *    smallest share, (decayed GPU-seconds used + GPUs held now) / weight, ties by account id; within
 *    an account, higher `priority` first, then oldest (by `seq`). Each job placed adds its card to
 *    its account's held GPUs, so the next card may go to another account. An account holding its
 *    `runningGpus` limit places nothing (its jobs wait with ACCOUNT_LIMIT).
 * 2. A job may use a free card whose name matches its `gpuType` (case-insensitive, any part of
 *    the name); no `gpuType` matches every card (gpu-type.ts).
 * 3. A job with no free matching card waits, and does not block later jobs that can run on
 *    other cards (no head-of-line blocking across types). A later job can never take a card an
 *    earlier waiting job could use: that card would have been free at the earlier job's turn.
 * 4. Among its free matching cards a job takes the one fewest specific requests in the queue
 *    want (so "any" jobs leave scarce types to the jobs that asked for them), then the one on
 *    the node with the most free cards (spreads load over hosts), then by node id and uuid.
 */
import { isAnyGpuType, matchingNames, normalizeGpuType } from "./gpu-type";

export type SnapshotCard = { nodeId: string; uuid: string; name: string; busy: boolean };
/** `clientId`: its account (default: one shared account); `priority`: 0 low, 1 normal (default), 2 high. */
export type QueuedJob = { jobId: string; gpuType: string | null; seq: number; clientId?: string; priority?: number };
/**
 * An account's standing: `usage` its GPU-seconds decayed to now, `held` the GPUs it holds now,
 * `weight` its share (> 0), `runningGpus` the most GPUs it may hold (null: no limit).
 */
export type AccountShare = { usage: number; held: number; weight: number; runningGpus: number | null; overQuota?: string };
/** `accounts`: absent ones have used nothing, hold nothing, weigh 1, have no limit. */
export type Snapshot = { cards: SnapshotCard[]; queue: QueuedJob[]; accounts?: ReadonlyMap<string, AccountShare> };

export type Placement = { jobId: string; nodeId: string; gpuUuid: string };
export type WaitReason = "NO_GPUS" | "NO_MATCHING_GPU" | "MATCHING_GPUS_BUSY" | "ACCOUNT_LIMIT" | "QUOTA_EXCEEDED";
/** `limit`: the account's running-GPU limit, for ACCOUNT_LIMIT; `quota`: the monthly quota used up, for QUOTA_EXCEEDED. */
export type Waiting = { jobId: string; reason: WaitReason; limit?: number; quota?: string };
export type Plan = { placements: Placement[]; waiting: Waiting[] };

export const PRIORITIES = ["low", "normal", "high"] as const;
export type Priority = (typeof PRIORITIES)[number];
export const NORMAL_PRIORITY = 1;
const UNUSED: AccountShare = { usage: 0, held: 0, weight: 1, runningGpus: null };

const shareOf = (a: AccountShare, started: number) => (a.usage + a.held + started) / a.weight;

/**
 * Visits the queued jobs in fair-share order. `visit` answers whether the job started (its account
 * then holds one more GPU, which may put another account first). Accounts are compared by scanning
 * them at each step: the snapshot holds a bounded number of jobs and accounts.
 */
export function walkFair<J extends QueuedJob>(
  queue: readonly J[],
  accounts: ReadonlyMap<string, AccountShare>,
  visit: (job: J, account: AccountShare & { started: number }) => boolean,
): void {
  const byAccount = new Map<string, J[]>();
  for (const job of queue) {
    const id = job.clientId ?? "";
    const list = byAccount.get(id);
    if (list) list.push(job);
    else byAccount.set(id, [job]);
  }
  const lanes = [...byAccount].map(([id, jobs]) => ({
    id,
    jobs: jobs.sort((a, b) => (b.priority ?? NORMAL_PRIORITY) - (a.priority ?? NORMAL_PRIORITY) || a.seq - b.seq),
    next: 0,
    account: { ...(accounts.get(id) ?? UNUSED), started: 0 },
  }));
  for (;;) {
    let best: (typeof lanes)[number] | undefined;
    for (const lane of lanes) {
      if (lane.next >= lane.jobs.length) continue;
      if (!best) best = lane;
      else {
        const d = shareOf(lane.account, lane.account.started) - shareOf(best.account, best.account.started);
        if (d < 0 || (d === 0 && lane.id < best.id)) best = lane;
      }
    }
    if (!best) return;
    if (visit(best.jobs[best.next++], best.account)) best.account.started++;
  }
}

export function plan(snapshot: Snapshot): Plan {
  const placements: Placement[] = [];
  const waiting: Waiting[] = [];
  const queue = snapshot.queue;
  const names = [...new Set(snapshot.cards.map((c) => c.name))];

  // Which card names each distinct request matches, computed once per pass.
  const matchCache = new Map<string | null, Set<string>>();
  const namesFor = (gpuType: string | null) => {
    const key = gpuType === null ? null : normalizeGpuType(gpuType);
    let set = matchCache.get(key);
    if (!set) matchCache.set(key, (set = new Set(matchingNames(names, gpuType))));
    return set;
  };

  // Demand per name: how many queued jobs asked specifically for a type this name satisfies.
  const demand = new Map<string, number>();
  for (const job of queue) {
    if (isAnyGpuType(job.gpuType)) continue;
    for (const name of namesFor(job.gpuType)) demand.set(name, (demand.get(name) ?? 0) + 1);
  }

  const free = snapshot.cards.filter((c) => !c.busy);
  const freePerNode = new Map<string, number>();
  for (const card of free) freePerNode.set(card.nodeId, (freePerNode.get(card.nodeId) ?? 0) + 1);
  const taken = new Set<string>();

  walkFair(queue, snapshot.accounts ?? new Map(), (job, account) => {
    const wanted = namesFor(job.gpuType);
    if (snapshot.cards.length === 0) {
      waiting.push({ jobId: job.jobId, reason: "NO_GPUS" });
      return false;
    }
    if (wanted.size === 0) {
      waiting.push({ jobId: job.jobId, reason: "NO_MATCHING_GPU" });
      return false;
    }
    if (account.overQuota) {
      waiting.push({ jobId: job.jobId, reason: "QUOTA_EXCEEDED", quota: account.overQuota });
      return false;
    }
    if (account.runningGpus !== null && account.held + account.started >= account.runningGpus) {
      waiting.push({ jobId: job.jobId, reason: "ACCOUNT_LIMIT", limit: account.runningGpus });
      return false;
    }
    let best: SnapshotCard | undefined;
    for (const card of free) {
      if (taken.has(card.uuid) || !wanted.has(card.name)) continue;
      if (!best || better(card, best, demand, freePerNode)) best = card;
    }
    if (!best) {
      waiting.push({ jobId: job.jobId, reason: "MATCHING_GPUS_BUSY" });
      return false;
    }
    taken.add(best.uuid);
    freePerNode.set(best.nodeId, (freePerNode.get(best.nodeId) ?? 1) - 1);
    placements.push({ jobId: job.jobId, nodeId: best.nodeId, gpuUuid: best.uuid });
    return true;
  });
  return { placements, waiting };
}

function better(a: SnapshotCard, b: SnapshotCard, demand: Map<string, number>, freePerNode: Map<string, number>): boolean {
  const da = demand.get(a.name) ?? 0;
  const db = demand.get(b.name) ?? 0;
  if (da !== db) return da < db;
  const fa = freePerNode.get(a.nodeId) ?? 0;
  const fb = freePerNode.get(b.nodeId) ?? 0;
  if (fa !== fb) return fa > fb;
  if (a.nodeId !== b.nodeId) return a.nodeId < b.nodeId;
  return a.uuid < b.uuid;
}

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
