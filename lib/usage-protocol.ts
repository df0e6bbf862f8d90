/**
 * The contract between the services that own a resource (gpu-scheduler, inference, dbaas) and the
 * usage ledger (services/usage). Owners publish batches of usage records on the durable channel
 * USAGE_CHANNEL (JetStream, per sender: lib/channels.ts); each record carries a source key that
 * names what it measures once (job + attempt, inference id, database + sample hour), and the
 * ledger stores a key once, so a redelivered or republished record never counts twice.
 *
 * Messages from the bus are untrusted: `checkUsageBatch` checks every field, and the ledger takes
 * a resource only from the role that owns it (`USAGE_OWNERS`).
 */
import type { Checked } from "./gpu-protocol";
import { isUuid } from "./uuid";

export const USAGE_CHANNEL = "usage.records";

export const USAGE_RESOURCES = ["gpu", "inference", "storage"] as const;
export type UsageResource = (typeof USAGE_RESOURCES)[number];

/** The bus role allowed to report each resource. */
export const USAGE_OWNERS: Readonly<Record<UsageResource, string>> = { gpu: "gpu-scheduler", inference: "inference", storage: "dbaas" };

/**
 * One measured use. `gpu`: an attempt held `quantity` cards from `start` to `end` (GPU-seconds =
 * cards × seconds), `name` the card's name. `storage`: a database held `quantity` MB from `start`
 * to `end` (MB-hours), `name` the engine. `inference`: `quantity` tokens answered at `end` (start =
 * end), `name` the model.
 */
export type UsageRecord = {
  key: string;
  clientId: string;
  resource: UsageResource;
  name: string;
  start: string;
  end: string;
  quantity: number;
  /** The share of the price its amount is charged at (0 to 1; absent: 1): batch inference (BATCH_CREDIT_FACTOR). */
  creditFactor?: number;
};

export type UsageBatch = { records: UsageRecord[] };

/** A record spans at most this long (a job attempt's time limit is a week; storage samples an hour). */
export const MAX_RECORD_SPAN_MS = 8 * 24 * 3600 * 1000;
export const MAX_BATCH_RECORDS = 1000;
const MAX_KEY = 200;
const MAX_NAME = 256;
/** No resource is measured in more than this per record (a guard against nonsense, not a quota). */
const MAX_QUANTITY = 1e12;

const validTime = (v: unknown) => typeof v === "string" && v.length <= 40 && Number.isFinite(Date.parse(v));

function recordProblem(r: unknown): string | undefined {
  if (typeof r !== "object" || r === null) return "record";
  const v = r as Record<string, unknown>;
  if (typeof v.key !== "string" || !v.key || v.key.length > MAX_KEY) return "key";
  if (typeof v.clientId !== "string" || !isUuid(v.clientId)) return "clientId";
  if (!(USAGE_RESOURCES as readonly unknown[]).includes(v.resource)) return "resource";
  if (typeof v.name !== "string" || !v.name || v.name.length > MAX_NAME) return "name";
  if (!validTime(v.start)) return "start";
  if (!validTime(v.end)) return "end";
  const span = Date.parse(v.end as string) - Date.parse(v.start as string);
  if (span < 0 || span > MAX_RECORD_SPAN_MS || (v.resource === "inference" && span !== 0)) return "end";
  if (typeof v.quantity !== "number" || !Number.isFinite(v.quantity) || v.quantity < 0 || v.quantity > MAX_QUANTITY) return "quantity";
  if (v.creditFactor !== undefined && !(typeof v.creditFactor === "number" && v.creditFactor >= 0 && v.creditFactor <= 1)) return "creditFactor";
  return undefined;
}

/** A batch as published, every record checked; the first bad field is named. */
export function checkUsageBatch(v: unknown): Checked<UsageBatch> {
  const records = (v as { records?: unknown } | null)?.records;
  if (!Array.isArray(records) || records.length === 0 || records.length > MAX_BATCH_RECORDS) return { ok: false, field: "records" };
  for (let i = 0; i < records.length; i++) {
    const problem = recordProblem(records[i]);
    if (problem) return { ok: false, field: `records[${i}].${problem}` };
  }
  const clean = (records as UsageRecord[]).map(({ key, clientId, resource, name, start, end, quantity, creditFactor }) => ({
    key,
    clientId,
    resource,
    name,
    start,
    end,
    quantity,
    ...(creditFactor !== undefined ? { creditFactor } : {}),
  }));
  return { ok: true, value: { records: clean } };
}

/** Source keys: what one record measures, once. */
export const gpuUsageKey = (jobId: string, attempt: number) => `gpu:${jobId}:${attempt}`;
export const inferenceUsageKey = (inferenceId: string) => `inference:${inferenceId}`;
export const storageUsageKey = (databaseId: string, hour: Date) => `storage:${databaseId}:${hour.toISOString()}`;

/**
 * An account's standing, as the usage service answers `usage.standings` (services/usage/reader.ts)
 * and the enforcers read it (lib/quota-gate.ts, lib/quota-reservations.ts).
 */
export const QUOTA_RESOURCES = ["credits", "gpuSeconds", "tokens", "databases", "storageMb", "runningGpus", "queuedJobs"] as const;
export type QuotaResource = (typeof QUOTA_RESOURCES)[number];

export type Quota = { resource: QuotaResource; period: "month" | null; limit: number | null; used: number; resetsAt: string | null };

export type QuotaDefaults = {
  credits: number | null;
  gpuSeconds: number | null;
  tokens: number | null;
  databases: number;
  storageMb: number | null;
  runningGpus: number | null;
  queuedJobs: number;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  fairShareWeight: number;
};

/** A price in credits (services/usage/pricing.ts). */
export type Price = { byName: ReadonlyArray<readonly [key: string, price: number]>; fallback: number };
/** `preemptibleFactor`: what a preemptible job's GPU-second costs of an ordinary one's (PREEMPTIBLE_CREDIT_FACTOR; absent: 1). */
export type UsagePrices = { gpuSecond: Price; kTokens: Price; gbHour: Price; preemptibleFactor?: number };

/**
 * A preemptible job's GPU time is reported under its card's name with this prefix (issue 30), so
 * the ledger keeps it apart and usage prices it at PREEMPTIBLE_CREDIT_FACTOR; GPU-seconds count alike.
 */
export const PREEMPTIBLE_PREFIX = "preemptible:";
/** The card's name of a GPU record's name, and whether the time was preemptible. */
export const gpuRecordName = (name: string): { card: string; preemptible: boolean } =>
  name.startsWith(PREEMPTIBLE_PREFIX) ? { card: name.slice(PREEMPTIBLE_PREFIX.length), preemptible: true } : { card: name, preemptible: false };

/**
 * An account's limits now, its quotas, the monthly quota it is over (null: none), and the prices
 * the ledger charges credits at (so an enforcer reserves a request's worst case at them; absent: free).
 */
export type Standing = { clientId: string; limits: QuotaDefaults; quotas: Quota[]; exceeded: Quota | null; prices?: UsagePrices };
