/**
 * The placement decision: a pure function of a snapshot (cards, queue) returning a plan. No
 * database, broker or clock here; the service reads the snapshot, calls `plan`, commits it.
 *
 * The rule, in order:
 * 1. Jobs are considered oldest first (by `seq`).
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
export type QueuedJob = { jobId: string; gpuType: string | null; seq: number };
export type Snapshot = { cards: SnapshotCard[]; queue: QueuedJob[] };

export type Placement = { jobId: string; nodeId: string; gpuUuid: string };
export type WaitReason = "NO_GPUS" | "NO_MATCHING_GPU" | "MATCHING_GPUS_BUSY";
export type Waiting = { jobId: string; reason: WaitReason };
export type Plan = { placements: Placement[]; waiting: Waiting[] };

export function plan(snapshot: Snapshot): Plan {
  const placements: Placement[] = [];
  const waiting: Waiting[] = [];
  const queue = [...snapshot.queue].sort((a, b) => a.seq - b.seq);
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

  for (const job of queue) {
    const wanted = namesFor(job.gpuType);
    if (snapshot.cards.length === 0) {
      waiting.push({ jobId: job.jobId, reason: "NO_GPUS" });
      continue;
    }
    if (wanted.size === 0) {
      waiting.push({ jobId: job.jobId, reason: "NO_MATCHING_GPU" });
      continue;
    }
    let best: SnapshotCard | undefined;
    for (const card of free) {
      if (taken.has(card.uuid) || !wanted.has(card.name)) continue;
      if (!best || better(card, best, demand, freePerNode)) best = card;
    }
    if (!best) {
      waiting.push({ jobId: job.jobId, reason: "MATCHING_GPUS_BUSY" });
      continue;
    }
    taken.add(best.uuid);
    freePerNode.set(best.nodeId, (freePerNode.get(best.nodeId) ?? 1) - 1);
    placements.push({ jobId: job.jobId, nodeId: best.nodeId, gpuUuid: best.uuid });
  }
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
