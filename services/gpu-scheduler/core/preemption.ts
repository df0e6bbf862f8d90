/**
 * Which preemptible jobs a waiting job stops (issue 30), pure: on one set of cards (one node, one
 * card name) the jobs whose cards, with the set's free cards and those of jobs already being
 * stopped, give the waiting job its k cards, wasting the fewest cards (cards stopped beyond what it
 * needs), the youngest jobs first. placement.ts `plan` asks it for a non-preemptible job that
 * finds no free set.
 */

/** A preemptible job holding cards (all on one node, of one name). `since`: when it was placed or started (ms); larger is younger. */
export type PreemptibleHolder = { jobId: string; nodeId: string; gpuUuids: string[]; since: number; preempting?: boolean };

/** What one set offers a waiting job: its free cards, its holders being stopped, and those that may be. */
export type SetOffer = { key: string; free: number; stopping: PreemptibleHolder[]; holders: PreemptibleHolder[] };

export type VictimChoice = { key: string; victims: PreemptibleHolder[]; stopping: PreemptibleHolder[]; wasted: number };

export const youngestFirst = (a: PreemptibleHolder, b: PreemptibleHolder) => b.since - a.since || (a.jobId < b.jobId ? -1 : 1);

/**
 * The holders to stop so that `need` more cards come free: the smallest card total ≥ need, and of
 * those the first in youngest-first order. Null when all of them are not enough.
 */
export function fewestWasted(holders: readonly PreemptibleHolder[], need: number): PreemptibleHolder[] | null {
  if (need <= 0) return [];
  if (holders.length < need && holders.reduce((s, j) => s + j.gpuUuids.length, 0) < need) return null;
  const jobs = holders.every((h, i) => i === 0 || youngestFirst(holders[i - 1], h) <= 0) ? holders : [...holders].sort(youngestFirst);
  // One card each (the usual case): the `need` youngest waste nothing.
  if (jobs.every((j) => j.gpuUuids.length === 1)) return jobs.length >= need ? jobs.slice(0, need) : null;
  const total = jobs.reduce((s, j) => s + j.gpuUuids.length, 0);
  if (total < need) return null;
  const cap = Math.min(total, need + Math.max(...jobs.map((j) => j.gpuUuids.length)));
  // reach[i][s]: jobs i.. can make exactly s cards.
  const reach = Array.from({ length: jobs.length + 1 }, () => new Array<boolean>(cap + 1).fill(false));
  reach[jobs.length][0] = true;
  for (let i = jobs.length - 1; i >= 0; i--) {
    const c = jobs[i].gpuUuids.length;
    for (let s = 0; s <= cap; s++) reach[i][s] = reach[i + 1][s] || (s >= c && reach[i + 1][s - c]);
  }
  let target = need;
  while (target <= cap && !reach[0][target]) target++;
  if (target > cap) return null;
  const chosen: PreemptibleHolder[] = [];
  for (let i = 0, left = target; i < jobs.length && left > 0; i++) {
    const c = jobs[i].gpuUuids.length;
    if (left >= c && reach[i + 1][left - c]) {
      chosen.push(jobs[i]);
      left -= c;
    }
  }
  return chosen;
}

/**
 * The best set to make room on for a job of `k` cards: no preemption at all if free cards and
 * those being stopped suffice (the job then waits for them), else the fewest cards wasted, then the
 * youngest victims (the oldest of them youngest), then the sets' order as given (placement's own).
 */
export function chooseVictims(offers: readonly SetOffer[], k: number): VictimChoice | null {
  let best: { choice: VictimChoice; rank: number[] } | null = null;
  for (const offer of offers) {
    const stoppingCards = offer.stopping.reduce((s, j) => s + j.gpuUuids.length, 0);
    const need = k - offer.free - stoppingCards;
    const victims = fewestWasted(offer.holders, need);
    if (!victims) continue;
    const wasted = Math.max(0, victims.reduce((s, j) => s + j.gpuUuids.length, 0) - Math.max(need, 0));
    const oldest = victims.length ? Math.min(...victims.map((v) => v.since)) : 0;
    const rank = [victims.length ? 1 : 0, wasted, -oldest];
    if (!best || lexLess(rank, best.rank)) best = { choice: { key: offer.key, victims, stopping: offer.stopping, wasted }, rank };
  }
  return best?.choice ?? null;
}

/** Whether `a` sorts before `b`, element by element. */
function lexLess(a: number[], b: number[]): boolean {
  const i = a.findIndex((x, j) => x !== b[j]);
  return i >= 0 && a[i] < b[i];
}
