/**
 * The enforcing side of quotas (gpu-scheduler, inference, dbaas): an account's standing from the
 * usage service (`usage.standing`), cached per account for QUOTA_CACHE_MS, so a job submission or
 * an inference costs a bus call at most once per account and period. Across replicas each cache
 * is at most that old, and the ledger lags use by its delivery (a batch within ~1 s): an account
 * may overshoot a monthly limit by what it uses in that time (documented in the README).
 * Without a usage service on the bus (not deployed) nothing is enforced here; when the call fails
 * the last standing known is used, else the request passes (logged): an outage of the ledger does
 * not stop the platform.
 */
import type { ServiceBroker } from "moleculer";
import { apiError } from "./errors";
import type { QuotaResource, Standing } from "./usage-protocol";

export type { Standing } from "./usage-protocol";

export class QuotaGate {
  private readonly cache = new Map<string, { at: number; standing: Standing }>();
  private warnedAt = 0;

  constructor(
    private readonly broker: ServiceBroker,
    private readonly ttlMs: number,
    private readonly warn: (message: string) => void,
  ) {}

  /** The standing of each account (absent: unknown, nothing enforced). */
  async standings(clientIds: readonly string[]): Promise<Map<string, Standing>> {
    const now = Date.now();
    const out = new Map<string, Standing>();
    const stale: string[] = [];
    for (const id of new Set(clientIds)) {
      const hit = this.cache.get(id);
      if (hit && now - hit.at < this.ttlMs) out.set(id, hit.standing);
      else stale.push(id);
    }
    if (!stale.length || !(this.broker.registry as unknown as { hasService(name: string): boolean }).hasService("usage")) return out;
    try {
      for (let i = 0; i < stale.length; i += 1000) {
        const fresh = await this.broker.call<Standing[], { clientIds: string[] }>("usage.standing", { clientIds: stale.slice(i, i + 1000) });
        for (const s of fresh) {
          this.cache.set(s.clientId, { at: now, standing: s });
          out.set(s.clientId, s);
        }
      }
    } catch (err) {
      if (now - this.warnedAt > 10_000) this.warn(`Quota standing unavailable, the last known is used: ${(err as Error).message}`);
      this.warnedAt = now;
      for (const id of stale) {
        const last = this.cache.get(id);
        if (last) out.set(id, last.standing);
      }
    }
    if (this.cache.size > 100_000) this.cache.clear(); // bounded: a cache, not a table
    return out;
  }

  /** Forgets the account's standing: its next check asks usage (after a change this replica made, e.g. a file stored). */
  forget(clientId: string): void {
    this.cache.delete(clientId);
  }

  /** 403 QUOTA_EXCEEDED when the account is at or over the limit of one of `resources`. */
  async check(clientId: string, resources: readonly QuotaResource[]): Promise<Standing | undefined> {
    const standing = (await this.standings([clientId])).get(clientId);
    const over = standing?.quotas.find((q) => resources.includes(q.resource) && q.limit !== null && q.used >= q.limit);
    if (over) {
      const { resource, limit, used, resetsAt } = over;
      const when = resetsAt ? ` until ${resetsAt}` : "";
      throw apiError("QUOTA_EXCEEDED", `The account's ${resource} quota (${limit}${over.period ? ` per ${over.period}` : ""}) is used up${when}`, {
        resource,
        limit,
        used,
        ...(resetsAt ? { resetsAt } : {}),
      });
    }
    return standing;
  }
}
