/**
 * bench:scheduler's preemption pass (BENCH_MODE `preempt`): the time of one placement pass, the pure
 * `plan()` of services/gpu-scheduler/core/placement.ts, on a full cluster of 125 nodes × 8 cards
 * with 100 ordinary jobs waiting (1 card each, 10 accounts):
 * - preemptible: the 1,000 cards held by 1,000 preemptible jobs, so the pass chooses which to stop;
 * - baseline: the same cards held by ordinary jobs (nothing to stop, every job waits).
 * PREEMPT_PASSES (default 300) timed passes each, after 30 warm-up passes, alternating.
 */
import { plan, type QueuedJob, type Snapshot, type SnapshotCard } from "../services/gpu-scheduler/core/placement";
import type { PreemptibleHolder } from "../services/gpu-scheduler/core/preemption";

const NODES = 125;
const CARDS_PER_NODE = 8;
const WAITING = 100;
const ACCOUNTS = 10;
const PASSES = Number(process.env.PREEMPT_PASSES || 300);
const WARMUP = 30;
const CARD = "NVIDIA H100 80GB HBM3";

const fmt = (n: number, digits = 2) => n.toFixed(digits);
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

/** The full cluster; `preemptible`: its cards held by preemptible jobs, else by ordinary ones. */
export function preemptionSnapshot(preemptible: boolean): Snapshot {
  const cards: SnapshotCard[] = [];
  const holders: PreemptibleHolder[] = [];
  for (let n = 0; n < NODES; n++)
    for (let c = 0; c < CARDS_PER_NODE; c++) {
      const card = { nodeId: `node-${n}`, uuid: `GPU-${n}-${c}`, name: CARD, busy: true };
      cards.push(card);
      // Placed over the last hour, in no particular order (youngest first must sort them).
      holders.push({ jobId: `p-${n}-${c}`, nodeId: card.nodeId, gpuUuids: [card.uuid], since: ((n * 7919 + c * 104729) % 3_600_000) + 1 });
    }
  const queue: QueuedJob[] = Array.from({ length: WAITING }, (_, i) => ({ jobId: `w-${i}`, gpuType: null, seq: i + 1, clientId: `acct-${i % ACCOUNTS}` }));
  return { cards, queue, preemptible: preemptible ? holders : undefined };
}

function timePass(snapshot: Snapshot, into: number[]): number {
  const t0 = performance.now();
  const result = plan(snapshot);
  into.push(performance.now() - t0);
  return result.preemptions.length;
}

export function runPreemptionPass(): { preemptibleP50: number; baselineP50: number } {
  const withPre = preemptionSnapshot(true);
  const without = preemptionSnapshot(false);
  const pre: number[] = [];
  const base: number[] = [];
  let stopped = 0;
  // Alternating which goes first; the warm-up passes are dropped below.
  for (let i = 0; i < WARMUP + PASSES; i++) {
    if (i % 2) stopped = timePass(withPre, pre);
    timePass(without, base);
    if (!(i % 2)) stopped = timePass(withPre, pre);
  }
  const sorted = (xs: number[]) => xs.slice(WARMUP).sort((x, y) => x - y);
  const [p, b] = [sorted(pre), sorted(base)];
  const figures = { preemptibleP50: quantile(p, 0.5), baselineP50: quantile(b, 0.5) };
  console.log(`Placement pass with preemption (pure plan(), ${NODES * CARDS_PER_NODE} cards all held, ${WAITING} ordinary jobs waiting, ${PASSES} passes)`);
  console.log(`  1,000 preemptible jobs running: p50 ${fmt(figures.preemptibleP50)} ms, p99 ${fmt(quantile(p, 0.99))} ms (${stopped} chosen to stop per pass)`);
  console.log(`  baseline, the cards held by ordinary jobs: p50 ${fmt(figures.baselineP50)} ms, p99 ${fmt(quantile(b, 0.99))} ms`);
  console.log(`  preemption's cost: ${fmt(figures.preemptibleP50 / figures.baselineP50)}× the baseline's pass (p50)\n`);
  return figures;
}
