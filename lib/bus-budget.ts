/**
 * Per-sender budgets on the bus (pure: the time is passed in). A gpu-node credential is the least
 * trusted one and there may be many: what each gpu-node may send per second, by packet kind, is
 * capped where packets arrive, before they are parsed, so a flooding node costs O(1) per packet
 * and cannot starve the receiving process's event loop (its callers, and Moleculer's own
 * heartbeats that keep other nodes in the registry). Excess packets are dropped and counted.
 */
import { LruCache } from "./lru-cache";

export type Budget = { perSecond: number; burst: number };

/** The roles whose every sender id gets its own budget (core roles are not budgeted: their calls are the platform's traffic). */
export const BUDGETED_ROLES = new Set(["gpu-node"]);

/**
 * What one gpu-node may send per packet kind. Its real traffic: a heartbeat event per
 * GPU_HEARTBEAT_S (default 2 s) to each scheduler and metrics replica, answers to the scheduler's calls
 * (run, cancel, pages of logs and artifacts) and a few discovery packets at start.
 */
export const NODE_BUDGETS: Readonly<Record<string, Budget>> = {
  // Heartbeats: room for GPU_HEARTBEAT_S down to 0.05 s (tests use 0.2).
  EVENT: { perSecond: 20, burst: 40 },
  // Answers: the scheduler's calls are a few per job; a model deployment's answers (gpu-node.serve) are
  // paced by the node to SERVE_PACKETS (services/gpu-node/serve-pacing.ts), half of this.
  RES: { perSecond: 2000, burst: 4000 },
  // DISCOVER makes every process answer with its INFO, INFO rebuilds the registry: a few at start.
  other: { perSecond: 10, burst: 30 },
};

/** Senders remembered at once (gpu-node ids are the generated users: far fewer in practice). */
const MAX_KEYS = 10_000;

/** Token buckets, one per key, each filling at `perSecond` up to `burst`. */
export class TokenBuckets {
  private readonly buckets = new LruCache<string, { tokens: number; atMs: number }>(MAX_KEYS);

  /** Takes one token from `key`'s bucket; false when it is empty (the packet is over budget). */
  take(key: string, budget: Budget, nowMs: number): boolean {
    const b = this.buckets.get(key) ?? { tokens: budget.burst, atMs: nowMs };
    b.tokens = Math.min(budget.burst, b.tokens + ((nowMs - b.atMs) / 1000) * budget.perSecond);
    b.atMs = nowMs;
    const ok = b.tokens >= 1;
    if (ok) b.tokens -= 1;
    this.buckets.set(key, b);
    return ok;
  }
}

/** The budget of a packet kind from a sender of `role`, or undefined when that role is not budgeted. */
export function budgetOf(role: string | undefined, cmd: string): Budget | undefined {
  if (role === undefined || !BUDGETED_ROLES.has(role)) return undefined;
  return NODE_BUDGETS[cmd] ?? NODE_BUDGETS.other;
}
