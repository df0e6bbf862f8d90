/**
 * The placement decision: a pure function of a snapshot (cards, queue) returning a plan. No
 * database, broker or clock here; the service reads the snapshot, calls `plan`, commits it.
 *
 * The rule, in order:
 * 1. Jobs are considered in fair-share order (`walkFair`): next comes a job of the account with the
 *    smallest share, (decayed GPU-seconds used + GPUs held now) / weight, ties by account id; within
 *    an account, higher `priority` first, then oldest (by `seq`). Each job placed adds its cards to
 *    its account's held GPUs, so the next card may go to another account. An account that would
 *    hold more than its `runningGpus` limit places nothing more (its jobs wait with ACCOUNT_LIMIT).
 * 2. A job of `gpuCount` k takes k free cards of one name on one node, the name matching its
 *    `gpuType` (case-insensitive, any part of the name); no `gpuType` matches every card (gpu-type.ts).
 * 3. A job that cannot be placed waits, and does not block later jobs that can run on other cards
 *    (no head-of-line blocking across types). A later job can never take a card an earlier waiting
 *    one-card job could use: that card would have been free at the earlier job's turn. A waiting
 *    gang (k > 1) whose cards exist but are busy reserves, for this pass, the node where it lacks
 *    the fewest: later jobs leave that node's matching free cards alone, so as its jobs end the
 *    gang gets a whole set there instead of starving behind a stream of one-card jobs. Only the
 *    first such gang of a pass reserves (in fair-share order), so reservations idle at most one node.
 * 3a. A job of an array with `arrayParallelism` p waits (ARRAY_LIMIT) while p jobs of its array
 *    hold cards, those placed earlier in the pass included. Otherwise an array's jobs are its
 *    account's jobs like any other (fair share counts each card they hold).
 * 4. Among the (node, name) sets that fit, a job takes the name fewest specific requests in the
 *    queue want (so "any" jobs leave scarce types to the jobs that asked for them), then the best
 *    fit: the node left with the fewest free cards of that name (small jobs fill partly used
 *    nodes and whole nodes stay whole for big gangs), then by node id; the cards by uuid.
 * 5. Preemptible jobs (issue 30) come after every other job, so they take only cards no waiting
 *    ordinary job could use. An ordinary job that finds no free set stops preemptible jobs holding
 *    cards it could use (preemption.ts: fewest cards wasted, youngest first) and reserves that set
 *    (PREEMPTING) until they are gone; jobs already being stopped count as cards coming free.
 */
import { isAnyGpuType, matchingNames, normalizeGpuType } from "./gpu-type";
import { chooseVictims, type PreemptibleHolder, type SetOffer, youngestFirst } from "./preemption";

export type SnapshotCard = { nodeId: string; uuid: string; name: string; busy: boolean };
/** `clientId`: its account (default: one shared account); `priority`: 0 low, 1 normal (default), 2 high; `gpuCount`: cards (default 1). */
export type QueuedJob = {
  jobId: string;
  gpuType: string | null;
  seq: number;
  clientId?: string;
  priority?: number;
  gpuCount?: number;
  timeoutSeconds?: number;
  /** May run only on cards no ordinary job waits for, and be stopped for one. */
  preemptible?: boolean;
  /** Its array (`arrayParallelism` caps how many of it hold cards at once: `Snapshot.arrays`). */
  arrayId?: string | null;
};
/** An array whose jobs are capped: `parallelism`, and how many of its jobs hold cards now (`active`). */
export type ArrayCap = { parallelism: number; active: number };
/**
 * An account's standing: `usage` its GPU-seconds decayed to now, `held` the GPUs it holds now,
 * `weight` its share (> 0), `runningGpus` the most GPUs it may hold (null: no limit);
 * `gpuSecondsLeft`, `creditsLeft`: the monthly GPU-seconds and credits left after the worst case of its
 * jobs holding cards (absent: no limit); `creditsPerGpuSecond`: the price of a card by its name (absent: free).
 */
export type AccountShare = {
  usage: number;
  held: number;
  weight: number;
  runningGpus: number | null;
  overQuota?: string;
  gpuSecondsLeft?: number;
  creditsLeft?: number;
  creditsPerGpuSecond?: (cardName: string) => number;
};
/** `accounts`: absent ones have used nothing, hold nothing, weigh 1, have no limit. */
export type Snapshot = {
  cards: SnapshotCard[];
  queue: QueuedJob[];
  accounts?: ReadonlyMap<string, AccountShare>;
  /** Arrays with a parallelism cap, by id (absent ones are not capped). */
  arrays?: ReadonlyMap<string, ArrayCap>;
  /** The preemptible jobs holding cards (absent: none). */
  preemptible?: PreemptibleHolder[];
};

/** `gpuUuid`: the first of the job's cards `gpuUuids` (all on `nodeId`, of one name). */
export type Placement = { jobId: string; nodeId: string; gpuUuid: string; gpuUuids: string[] };
/** NO_NODE_BIG_ENOUGH: matching cards exist, but no node has `needed` of one name. */
export type WaitReason =
  "NO_GPUS" | "NO_MATCHING_GPU" | "NO_NODE_BIG_ENOUGH" | "MATCHING_GPUS_BUSY" | "ACCOUNT_LIMIT" | "QUOTA_EXCEEDED" | "ARRAY_LIMIT" | "PREEMPTING";
/**
 * `limit`: the account's running-GPU limit, for ACCOUNT_LIMIT (the array's parallelism for ARRAY_LIMIT); `quota`: the monthly quota used up, for
 * QUOTA_EXCEEDED; `needed`: the job's card count when more than 1.
 */
export type Waiting = { jobId: string; reason: WaitReason; limit?: number; quota?: string; reserved?: boolean; needed?: number; stopping?: number };
/** `forJobId`: the waiting job the preemptible job `jobId` (on `nodeId`) is stopped for. */
export type Preemption = { jobId: string; nodeId: string; forJobId: string };
export type Plan = { placements: Placement[]; waiting: Waiting[]; preemptions: Preemption[] };

export const NORMAL_PRIORITY = 1;
const UNUSED: AccountShare = { usage: 0, held: 0, weight: 1, runningGpus: null };

/** A job's card count: at least 1. */
export const cardsOf = (job: Pick<QueuedJob, "gpuCount">) => Math.max(1, job.gpuCount ?? 1);
const shareOf = (a: AccountShare, started: number) => (a.usage + a.held + started) / a.weight;

/**
 * Visits the queued jobs in fair-share order. `visit` answers whether the job started (its account
 * then holds its cards more, which may put another account first). Accounts are compared by scanning
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
    const job = best.jobs[best.next++];
    if (visit(job, best.account)) best.account.started += cardsOf(job);
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

  // Demand per name: how many cards queued jobs asked for specifically by a type this name satisfies.
  const demand = new Map<string, number>();
  for (const job of queue) {
    if (isAnyGpuType(job.gpuType)) continue;
    for (const name of namesFor(job.gpuType)) demand.set(name, (demand.get(name) ?? 0) + cardsOf(job));
  }

  // Per (node, name): every card, and the free ones in uuid order (placing or reserving removes them).
  const sets = new Map<string, CardSet>();
  for (const card of [...snapshot.cards].sort((a, b) => (a.uuid < b.uuid ? -1 : a.uuid > b.uuid ? 1 : 0))) {
    const key = `${card.nodeId}\u0000${card.name}`;
    let set = sets.get(key);
    if (!set) sets.set(key, (set = { key, nodeId: card.nodeId, name: card.name, size: 0, free: [] }));
    set.size++;
    if (!card.busy) set.free.push(card.uuid);
  }
  let reserved = false;
  // What each set offers a waiting ordinary job, built once (holders youngest first); a holder taken (to stop or to wait for) leaves it.
  const offersOf = new Map<string, SetOffer>();
  const setOf = new Map(snapshot.cards.map((c) => [c.uuid, `${c.nodeId}\u0000${c.name}`]));
  for (const h of snapshot.preemptible ?? []) {
    const key = setOf.get(h.gpuUuids[0]);
    if (key === undefined) continue; // on a card no longer schedulable
    let offer = offersOf.get(key);
    if (!offer) offersOf.set(key, (offer = { key, free: 0, stopping: [], holders: [] }));
    (h.preempting ? offer.stopping : offer.holders).push(h);
  }
  for (const offer of offersOf.values()) offer.holders.sort(youngestFirst);
  const preemptions: Preemption[] = [];
  const accounts = snapshot.accounts ?? new Map<string, AccountShare>();
  const startedBy = new Map<string, number>();
  const deferred: QueuedJob[] = [];
  // Each array's jobs holding cards, counting those placed in this pass.
  const active = new Map([...(snapshot.arrays ?? [])].map(([id, cap]) => [id, cap.active]));

  const visit = (job: QueuedJob, account: AccountShare & { started: number }, ordinary: boolean): boolean => {
    const wanted = namesFor(job.gpuType);
    const k = cardsOf(job);
    const wait = (reason: WaitReason, extra: Partial<Waiting> = {}) => {
      waiting.push({ jobId: job.jobId, reason, ...extra, ...(k > 1 && { needed: k }) });
      return false;
    };
    if (snapshot.cards.length === 0) return wait("NO_GPUS");
    if (wanted.size === 0) return wait("NO_MATCHING_GPU");
    if (account.overQuota) return wait("QUOTA_EXCEEDED", { quota: account.overQuota });
    // Placed only while the worst case of what runs leaves some of the quota: overshoot at most one job's reservation.
    if (account.gpuSecondsLeft !== undefined && account.gpuSecondsLeft <= 0) return wait("QUOTA_EXCEEDED", { quota: "gpuSeconds", reserved: true });
    if (account.creditsLeft !== undefined && account.creditsLeft <= 0) return wait("QUOTA_EXCEEDED", { quota: "credits", reserved: true });
    if (account.runningGpus !== null && account.held + account.started + k > account.runningGpus) return wait("ACCOUNT_LIMIT", { limit: account.runningGpus });
    const cap = job.arrayId ? snapshot.arrays?.get(job.arrayId) : undefined;
    if (cap && active.get(job.arrayId!)! >= cap.parallelism) return wait("ARRAY_LIMIT", { limit: cap.parallelism });
    const candidates = [...sets.values()].filter((set) => wanted.has(set.name));
    let best: CardSet | undefined;
    for (const set of candidates) if (set.free.length >= k && (!best || better(set, best, demand))) best = set;
    if (!best) {
      const big = candidates.filter((set) => set.size >= k);
      if (!big.length) return wait("NO_NODE_BIG_ENOUGH");
      if (ordinary && offersOf.size) {
        const offers: SetOffer[] = [];
        for (const set of big) {
          const offer = offersOf.get(set.key);
          if (offer) offers.push(Object.assign(offer, { free: set.free.length }));
        }
        const choice = chooseVictims(offers, k);
        if (choice) {
          // The set is this job's until they are gone: its free cards and every holder chosen stay out of later choices.
          sets.get(choice.key)!.free = [];
          const offer = offersOf.get(choice.key)!;
          const chosen = new Set(choice.victims.map((h) => h.jobId));
          offer.holders = offer.holders.filter((h) => !chosen.has(h.jobId));
          offer.stopping = [];
          for (const v of choice.victims) preemptions.push({ jobId: v.jobId, nodeId: v.nodeId, forJobId: job.jobId });
          return wait("PREEMPTING", { stopping: choice.victims.length + choice.stopping.length });
        }
      }
      if (k > 1 && !reserved) {
        // Hold the free cards of the set nearest to fitting, so later jobs cannot keep the gang out forever.
        reserved = true;
        const nearest = big.reduce((a, b) => (b.free.length > a.free.length || (b.free.length === a.free.length && b.nodeId < a.nodeId) ? b : a));
        nearest.free = [];
      }
      return wait("MATCHING_GPUS_BUSY");
    }
    const gpuUuids = best.free.splice(0, k);
    placements.push({ jobId: job.jobId, nodeId: best.nodeId, gpuUuid: gpuUuids[0], gpuUuids });
    if (cap) active.set(job.arrayId!, active.get(job.arrayId!)! + 1);
    if (account.gpuSecondsLeft !== undefined) account.gpuSecondsLeft -= k * (job.timeoutSeconds ?? 0);
    if (account.creditsLeft !== undefined) account.creditsLeft -= k * (job.timeoutSeconds ?? 0) * (account.creditsPerGpuSecond?.(best.name) ?? 0);
    startedBy.set(job.clientId ?? "", (startedBy.get(job.clientId ?? "") ?? 0) + k);
    return true;
  };

  walkFair(queue, accounts, (job, account) => {
    if (!job.preemptible) return visit(job, account, true);
    deferred.push(job);
    return false;
  });
  if (deferred.length) {
    // Then the preemptible jobs, on what is left; the cards their accounts started above count as held.
    const after = new Map(
      [...new Set(deferred.map((j) => j.clientId ?? ""))].map((id) => {
        const a = accounts.get(id) ?? UNUSED;
        return [id, { ...a, held: a.held + (startedBy.get(id) ?? 0) }];
      }),
    );
    walkFair(deferred, after, (job, account) => visit(job, account, false));
  }
  return { placements, waiting, preemptions };
}

/** The cards of one name on one node. */
type CardSet = { key: string; nodeId: string; name: string; size: number; free: string[] };

/** Whether `a` is the better set for a job of `k` cards: less specific demand, then best fit, then node id, then first free uuid. */
function better(a: CardSet, b: CardSet, demand: Map<string, number>): boolean {
  const da = demand.get(a.name) ?? 0;
  const db = demand.get(b.name) ?? 0;
  if (da !== db) return da < db;
  if (a.free.length !== b.free.length) return a.free.length < b.free.length; // fewer left after taking k
  if (a.nodeId !== b.nodeId) return a.nodeId < b.nodeId;
  return a.free[0] < b.free[0];
}

// The queue-position estimate lives beside this file; re-exported for the callers that import it from here.
export { jobsAhead, type QueueAccount, queuePosition, shareBefore } from "./queue-position";
