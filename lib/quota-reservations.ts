/**
 * Monthly quotas held at admission: each request reserves its worst case (an inference: its
 * `maxTokens` plus its prompt, and those tokens at its model's price in credits) in one atomic step, and is admitted only while the account's settled
 * use plus the reservations in flight is below the limit; on completion the reservation becomes
 * the actual use, on failure it is released, and a crashed replica's reservations expire (TTL).
 * So a request is never admitted once settled use reached the limit (sequential overshoot: only
 * the request that crossed it), and concurrent requests overshoot by at most one reservation.
 * With Redis every replica shares the counters (one Lua script per step); without, each process
 * counts on its own. The settled base is the larger of the counter and the ledger's use (the
 * standing from usage, through the QuotaGate's cache): the ledger may lag, never double-counts.
 */
import { randomUUID } from "crypto";
import type Redis from "ioredis";
import { apiError } from "./errors";
import type { QuotaGate, Standing } from "./quota-gate";
import type { QuotaResource } from "./usage-protocol";

/** Counters outlive their month by a few days (a request settled after midnight still finds its key). */
const KEY_TTL_MS = 40 * 24 * 3600 * 1000;

export type Counted = { admitted: boolean; settled: number; held: number };

export interface ReservationStore {
  /** Admits and holds `amount` when settled (at least `ledgerUsed`) + held < `limit`. */
  reserve(key: string, member: string, amount: number, ledgerUsed: number, limit: number, ttlMs: number): Promise<Counted>;
  /** Drops the reservation `member` (if still held) and adds `actual` to the settled use. */
  settle(key: string, member: string, actual: number): Promise<void>;
}

const amountOf = (member: string) => Number(member.slice(member.lastIndexOf("|") + 1));

export class MemoryReservationStore implements ReservationStore {
  private readonly counters = new Map<string, { settled: number; holds: Map<string, number> }>();

  constructor(private readonly now: () => number = Date.now) {}

  private counter(key: string) {
    let c = this.counters.get(key);
    if (!c) this.counters.set(key, (c = { settled: 0, holds: new Map() }));
    return c;
  }

  async reserve(key: string, member: string, amount: number, ledgerUsed: number, limit: number, ttlMs: number): Promise<Counted> {
    const c = this.counter(key);
    const now = this.now();
    let held = 0;
    for (const [m, expires] of c.holds) {
      if (expires <= now) c.holds.delete(m);
      else held += amountOf(m);
    }
    c.settled = Math.max(c.settled, ledgerUsed);
    const admitted = c.settled + held < limit;
    if (admitted) c.holds.set(member, now + ttlMs);
    return { admitted, settled: c.settled, held: admitted ? held + amount : held };
  }

  async settle(key: string, member: string, actual: number): Promise<void> {
    const c = this.counter(key);
    c.holds.delete(member);
    c.settled += actual;
  }
}

// KEYS[1]: hash {settled, held}; KEYS[2]: sorted set of reservations "<id>|<amount>" scored by expiry (ms).
const RESERVE_SCRIPT = `
local now = tonumber(ARGV[1])
local held = tonumber(redis.call('HGET', KEYS[1], 'held') or '0')
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, m in ipairs(expired) do held = held - tonumber(string.match(m, '|([^|]*)$')) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
if held < 0 then held = 0 end
local settled = math.max(tonumber(redis.call('HGET', KEYS[1], 'settled') or '0'), tonumber(ARGV[3]))
local admitted = 0
if settled + held < tonumber(ARGV[4]) then
  admitted = 1
  held = held + tonumber(string.match(ARGV[2], '|([^|]*)$'))
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[2])
end
redis.call('HSET', KEYS[1], 'settled', settled, 'held', held)
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {admitted, tostring(settled), tostring(held)}`;

const SETTLE_SCRIPT = `
local held = tonumber(redis.call('HGET', KEYS[1], 'held') or '0')
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then held = math.max(0, held - tonumber(string.match(ARGV[1], '|([^|]*)$'))) end
local settled = tonumber(redis.call('HGET', KEYS[1], 'settled') or '0') + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'settled', settled, 'held', held)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1`;

export class RedisReservationStore implements ReservationStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  // One hash tag per counter: both keys land on the same node of a Redis Cluster.
  private keys(key: string): [string, string] {
    return [`${this.prefix}:{${key}}:count`, `${this.prefix}:{${key}}:holds`];
  }

  async reserve(key: string, member: string, _amount: number, ledgerUsed: number, limit: number, ttlMs: number): Promise<Counted> {
    const [admitted, settled, held] = (await this.redis.eval(
      RESERVE_SCRIPT,
      2,
      ...this.keys(key),
      Date.now(),
      member,
      ledgerUsed,
      limit,
      ttlMs,
      KEY_TTL_MS,
    )) as [number, string, string];
    return { admitted: admitted === 1, settled: Number(settled), held: Number(held) };
  }

  async settle(key: string, member: string, actual: number): Promise<void> {
    await this.redis.eval(SETTLE_SCRIPT, 2, ...this.keys(key), member, actual, KEY_TTL_MS);
  }
}

/** A request's reservation: settled once (with what it used, or 0 when it failed); later calls do nothing. */
export type Hold = { settle(actual: number): void; release(): void };
const NOTHING_HELD: Hold = { settle: () => undefined, release: () => undefined };

export class QuotaReservations {
  constructor(
    private readonly gate: Pick<QuotaGate, "standings">,
    private readonly store: ReservationStore,
    private readonly ttlMs: number,
    private readonly warn: (message: string) => void,
  ) {}

  /**
   * Reserves `worstCase` of the account's monthly `resource`, or 403 QUOTA_EXCEEDED (details as
   * the gate's). No standing (no usage service) or no limit: nothing to hold. The store failing
   * (Redis down) falls back to the standing alone, logged: an outage does not stop the platform.
   */
  async hold(clientId: string, resource: QuotaResource, worstCase: number, now = new Date()): Promise<Hold> {
    const [hold] = await this.holdAll(clientId, (await this.gate.standings([clientId])).get(clientId), [[resource, worstCase]], now);
    return hold;
  }

  /**
   * Each claim (resource, worst case) held against `standing` (the account's, as the gate gave it),
   * the stores asked at once, or none: a refusal releases the others and throws.
   */
  async holdAll(clientId: string, standing: Standing | undefined, claims: ReadonlyArray<readonly [QuotaResource, number]>, now = new Date()): Promise<Hold[]> {
    const holds = await Promise.allSettled(claims.map(([resource, worstCase]) => this.reserve(clientId, standing, resource, worstCase, now)));
    const refused = holds.find((h) => h.status === "rejected");
    if (!refused) return holds.map((h) => (h as PromiseFulfilledResult<Hold>).value);
    for (const h of holds) if (h.status === "fulfilled") h.value.release();
    throw refused.reason;
  }

  private async reserve(clientId: string, standing: Standing | undefined, resource: QuotaResource, worstCase: number, now: Date): Promise<Hold> {
    const quota = standing?.quotas.find((q) => q.resource === resource);
    if (!quota || quota.limit === null) return NOTHING_HELD;
    const key = `${clientId}:${resource}:${now.toISOString().slice(0, 7)}`;
    const member = `${randomUUID()}|${worstCase}`;
    let counted: Counted;
    try {
      counted = await this.store.reserve(key, member, worstCase, quota.used, quota.limit, this.ttlMs);
    } catch (err) {
      this.warn(`Quota reservation failed, the standing alone is checked: ${(err as Error).message}`);
      counted = { admitted: quota.used < quota.limit, settled: quota.used, held: 0 };
      if (counted.admitted) return NOTHING_HELD;
    }
    if (!counted.admitted) throw exceeded(quota, counted.settled, counted.held);
    let done = false;
    const settle = (actual: number) => {
      if (done) return;
      done = true;
      this.store.settle(key, member, actual).catch((err) => this.warn(`Quota reservation not settled (it expires): ${(err as Error).message}`));
    };
    return { settle, release: () => settle(0) };
  }
}

function exceeded(quota: Standing["quotas"][number], settled: number, held: number): Error {
  const { resource, limit, resetsAt } = quota;
  const inFlight = held > 0 && settled < limit! ? " with the requests in flight" : "";
  return apiError("QUOTA_EXCEEDED", `The account's ${resource} quota (${limit} per month) is used up${inFlight}${resetsAt ? ` until ${resetsAt}` : ""}`, {
    resource,
    limit,
    used: settled,
    ...(resetsAt ? { resetsAt } : {}),
  });
}
