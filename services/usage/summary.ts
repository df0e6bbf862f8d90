/**
 * The usage view and the quotas of an account, from what the ledger summed, the jobs running now
 * (their time so far, from gpu-scheduler) and the databases it holds now (from dbaas). Pure: the
 * clock, the sums and the states are handed in.
 */
import type { UsageTotal } from "./ledger.repository";
import { gpuRecordName, Price, Quota, QUOTA_RESOURCES, QuotaDefaults, QuotaResource } from "../../lib/usage-protocol";
import { priceOf } from "./pricing";
import type { UsageSettings } from "./settings";

/** A job attempt holding cards now, or (`endedAt`) ended but not yet in the ledger (gpu-scheduler's `accountState`). */
export type RunningAttempt = { startedAt: string; endedAt?: string; cards: number; gpuName: string };
/** What gpu-scheduler and dbaas say of an account now. */
export type AccountNow = { running: RunningAttempt[]; heldGpus: number; queuedJobs: number; databases: number; storageMb: number };
export const NOTHING_NOW: AccountNow = { running: [], heldGpus: 0, queuedJobs: 0, databases: 0, storageMb: 0 };

export type UsageSummary = {
  from: string;
  to: string;
  gpu: { jobs: number; gpuSeconds: number; byGpuType: Record<string, number> };
  inference: { requests: number; tokens: number; byModel: Record<string, number> };
  databases: { active: number; storageMb: number; storageMbHours: number };
  credits: number;
};

/** The calendar month (UTC) holding `now`: its start and the next month's. */
export function monthOf(now: Date): { start: Date; end: Date } {
  return { start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)), end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)) };
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;
const add = (map: Record<string, number>, key: string, n: number) => (map[key] = (map[key] ?? 0) + n);

/** The usage of one account in [from, to) (`to` after now counts until now). */
export function summarize(
  totals: readonly UsageTotal[],
  now: AccountNow,
  window: { from: Date; to: Date },
  clock: Date,
  prices: UsageSettings["prices"],
): UsageSummary {
  const gpu = { jobs: 0, gpuSeconds: 0, byGpuType: {} as Record<string, number> };
  const inference = { requests: 0, tokens: 0, byModel: {} as Record<string, number> };
  let storageMbHours = 0;
  let credits = 0;
  const charge = (price: Price, name: string, units: number) => (credits += priceOf(price, name) * units);
  // A preemptible job's GPU-seconds: its card's price × PREEMPTIBLE_CREDIT_FACTOR.
  const chargeGpu = (name: string, seconds: number) => {
    const { card, preemptible } = gpuRecordName(name);
    charge(prices.gpuSecond, card, seconds * (preemptible ? (prices.preemptibleFactor ?? 1) : 1));
  };
  for (const t of totals) {
    // What is charged: the amount at each record's credit factor (batch inference: BATCH_CREDIT_FACTOR).
    const billed = t.billed ?? t.amount;
    if (t.resource === "gpu") {
      gpu.jobs += t.events;
      gpu.gpuSeconds += t.amount;
      add(gpu.byGpuType, t.name, t.amount);
      chargeGpu(t.name, billed);
    } else if (t.resource === "inference") {
      inference.requests += t.events;
      inference.tokens += t.amount;
      add(inference.byModel, t.name, t.amount);
      charge(prices.kTokens, t.name, billed / 1000);
    } else {
      storageMbHours += t.amount;
      charge(prices.gbHour, t.name, billed / 1024);
    }
  }
  // Jobs running now (their time inside the window so far) and ended ones on their way to the ledger, × cards.
  const end = Math.min(window.to.getTime(), clock.getTime());
  for (const r of now.running) {
    const ended = r.endedAt === undefined ? undefined : Date.parse(r.endedAt);
    const seconds = (Math.min(end, ended ?? end) - Math.max(Date.parse(r.startedAt), window.from.getTime())) / 1000;
    if (seconds <= 0) continue;
    // An ended attempt counts as a job in the window holding its end, as the ledger counts it.
    if (ended === undefined || (ended > window.from.getTime() && ended <= window.to.getTime())) gpu.jobs++;
    gpu.gpuSeconds += seconds * r.cards;
    add(gpu.byGpuType, r.gpuName, seconds * r.cards);
    chargeGpu(r.gpuName, seconds * r.cards);
  }
  for (const k of Object.keys(gpu.byGpuType)) gpu.byGpuType[k] = round(gpu.byGpuType[k], 3);
  return {
    from: window.from.toISOString(),
    to: window.to.toISOString(),
    gpu: { ...gpu, gpuSeconds: round(gpu.gpuSeconds, 3) },
    inference,
    databases: { active: now.databases, storageMb: round(now.storageMb, 2), storageMbHours: round(storageMbHours, 3) },
    credits: round(credits, 6),
  };
}

export const MONTHLY: readonly QuotaResource[] = ["credits", "gpuSeconds", "tokens"];

/** Every setting an admin may override per account (null: back to the default). */
export const OVERRIDABLE = [...QUOTA_RESOURCES, "requestsPerMinute", "tokensPerMinute", "fairShareWeight"] as const;
export type Overridable = (typeof OVERRIDABLE)[number];
export type Overrides = Partial<Record<Overridable, number | null>>;
export type EffectiveLimits = QuotaDefaults;

/** The account's limits: its overrides where set, else the defaults. */
export function effectiveLimits(defaults: QuotaDefaults, overrides: Overrides | undefined): EffectiveLimits {
  const limits = { ...defaults } as Record<Overridable, number | null>;
  for (const key of OVERRIDABLE) {
    const v = overrides?.[key];
    if (v !== undefined && v !== null) limits[key] = v;
  }
  return limits as EffectiveLimits;
}

/** GET /api/quotas: each resource's period, limit, use and reset, this month. */
export function quotasOf(limits: EffectiveLimits, month: UsageSummary, now: AccountNow, clock: Date): Quota[] {
  const resetsAt = monthOf(clock).end.toISOString();
  const used: Record<QuotaResource, number> = {
    credits: month.credits,
    gpuSeconds: month.gpu.gpuSeconds,
    tokens: month.inference.tokens,
    databases: now.databases,
    storageMb: round(now.storageMb, 2),
    runningGpus: now.heldGpus,
    queuedJobs: now.queuedJobs,
  };
  return QUOTA_RESOURCES.map((resource) => {
    const monthly = MONTHLY.includes(resource);
    return { resource, period: monthly ? "month" : null, limit: limits[resource], used: used[resource], resetsAt: monthly ? resetsAt : null };
  });
}

/** The first monthly quota at or over its limit (new jobs, inferences and databases are refused; queued jobs wait). */
export function exceededMonthly(quotas: readonly Quota[]): Quota | undefined {
  return quotas.find((q) => q.period === "month" && q.limit !== null && q.used >= q.limit);
}
