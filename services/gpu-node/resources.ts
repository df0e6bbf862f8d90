/**
 * How much of the host one job may use, from the host and its cards (pure). Unset limits are a
 * fair share per card: memory = min(8 GiB, host memory × JOB_MEMORY_FRACTION / cards), CPUs =
 * host CPUs / cards. Limits the operator sets are taken as given, but a node whose cards × limit
 * exceed the host's memory or CPUs refuses to start unless GPU_ALLOW_OVERCOMMIT=true.
 */

/** Memory per job when GPU_JOB_MEMORY_MB is unset, at most (the host's share may be less). */
export const DEFAULT_JOB_MEMORY_MB = 8192;
/** Part of the host's memory the jobs share when limits are derived (the rest: node, OS, page cache). */
export const JOB_MEMORY_FRACTION = 0.75;
/** Below this a derived CPU share is rounded up: a job always gets a useful slice. */
const MIN_JOB_CPUS = 0.1;

export type HostCapacity = { memoryMb: number; cpus: number };
export type ConfiguredLimits = { memoryMb?: number; cpus?: number };
export type JobResources = { memoryMb: number; cpus: number };
export type ResourcePlan = { ok: true; limits: JobResources; warnings: string[] } | { ok: false; error: string };

export function planJobResources(host: HostCapacity, cards: number, configured: ConfiguredLimits, allowOvercommit: boolean): ResourcePlan {
  const n = Math.max(cards, 1);
  const memoryMb = configured.memoryMb ?? Math.max(1, Math.min(DEFAULT_JOB_MEMORY_MB, Math.floor((host.memoryMb * JOB_MEMORY_FRACTION) / n)));
  const cpus = configured.cpus ?? Math.max(MIN_JOB_CPUS, Math.floor((host.cpus / n) * 100) / 100);
  const over: string[] = [];
  if (configured.memoryMb !== undefined && n * memoryMb > host.memoryMb)
    over.push(`${n} card(s) × GPU_JOB_MEMORY_MB=${memoryMb} = ${n * memoryMb} MiB exceeds the host's ${host.memoryMb} MiB`);
  if (configured.cpus !== undefined && n * cpus > host.cpus)
    over.push(`${n} card(s) × GPU_JOB_CPUS=${cpus} = ${n * cpus} CPUs exceeds the host's ${host.cpus}`);
  if (over.length && !allowOvercommit)
    return { ok: false, error: `Job limits overcommit this host: ${over.join("; ")}. Lower them, or set GPU_ALLOW_OVERCOMMIT=true` };
  return { ok: true, limits: { memoryMb, cpus }, warnings: over.map((o) => `Overcommitted (GPU_ALLOW_OVERCOMMIT=true): ${o}`) };
}
