/**
 * Reads an account's usage and standing: the ledger's sums, plus what the owners know now (jobs
 * running and queued from gpu-scheduler, databases and ready snapshots from dbaas), asked over the bus in one call per
 * owner for any number of accounts. An owner not running (or failing) counts as nothing now, with
 * a warning: usage and quotas stay readable while a service is down.
 */
import { Context, Errors } from "moleculer";
import type { Standing, UsageRecord } from "../../lib/usage-protocol";
import type { LedgerRepository, UsageTotal } from "./ledger.repository";
import type { OverridesRepository } from "./overrides.repository";
import type { UsageSettings } from "./settings";
import { AccountNow, effectiveLimits, exceededMonthly, monthOf, NOTHING_NOW, quotasOf, summarize, UsageSummary } from "./summary";

type GpuNow = Record<string, Pick<AccountNow, "running" | "heldGpus" | "queuedJobs"> & { pending?: UsageRecord[] }>;
type DbNow = Record<string, Pick<AccountNow, "databases" | "storageMb">>;

export class UsageReader {
  constructor(
    private readonly ledger: Pick<LedgerRepository, "totalsAndRecorded">,
    private readonly overrides: Pick<OverridesRepository, "of">,
    private readonly config: UsageSettings,
    private readonly warn: (message: string) => void,
  ) {}

  month(now: Date) {
    return monthOf(now);
  }

  async usage(ctx: Context, clientId: string, window: { from: Date; to: Date }, now: Date): Promise<UsageSummary> {
    const { totals, states } = await this.read(ctx, [clientId], window);
    return summarize(totals, states.get(clientId)!, window, now, this.config.prices);
  }

  /**
   * The ledger's sums and what the owners say now, the owners asked first: an attempt gpu-scheduler
   * still holds in its outbox counts unless the ledger has its key in the snapshot that sums it (so
   * a job that just ended is never missing, and never counted twice).
   */
  private async read(ctx: Context, clientIds: string[], window: { from: Date; to: Date }) {
    const states = await this.now(ctx, clientIds);
    const pending = [...states.values()].flatMap((s) => s.pending);
    const { totals, recorded } = await this.ledger.totalsAndRecorded(
      clientIds,
      window.from,
      window.to,
      pending.map((p) => p.key),
    );
    for (const s of states.values())
      s.running = [
        ...s.running,
        ...s.pending.filter((p) => !recorded.has(p.key)).map((p) => ({ startedAt: p.start, endedAt: p.end, cards: p.quantity, gpuName: p.name })),
      ];
    return { totals, states };
  }

  /** Each account's standing this month (in the order given). */
  async standings(ctx: Context, clientIds: string[], now: Date): Promise<Standing[]> {
    const month = monthOf(now);
    const [{ totals, states }, overrides] = await Promise.all([this.read(ctx, clientIds, { from: month.start, to: now }), this.overrides.of(clientIds)]);
    const byClient = new Map<string, UsageTotal[]>();
    for (const t of totals) byClient.set(t.clientId, [...(byClient.get(t.clientId) ?? []), t]);
    return clientIds.map((clientId) => {
      const state = states.get(clientId)!;
      const limits = effectiveLimits(this.config.defaults, overrides.get(clientId));
      const summary = summarize(byClient.get(clientId) ?? [], state, { from: month.start, to: now }, now, this.config.prices);
      const quotas = quotasOf(limits, summary, state, now);
      return { clientId, limits, quotas, exceeded: exceededMonthly(quotas) ?? null, prices: this.config.prices };
    });
  }

  /** What gpu-scheduler and dbaas (databases, and snapshots in the storage) say of these accounts now. */
  private async now(ctx: Context, clientIds: string[]): Promise<Map<string, AccountNow & { pending: UsageRecord[] }>> {
    const ask = async <T>(action: string): Promise<Record<string, T>> => {
      // A platform without that service (not deployed, or down) has nothing of it to count now.
      if (!(ctx.broker.registry as unknown as { hasService(name: string): boolean }).hasService(action.split(".")[0])) return {};
      try {
        return await ctx.call<Record<string, T>, { clientIds: string[] }>(action, { clientIds });
      } catch (err) {
        if (!(err instanceof Errors.ServiceNotFoundError)) this.warn(`${action} failed, counted as nothing now: ${(err as Error).message}`);
        return {};
      }
    };
    const [gpu, db, snapshots, files] = await Promise.all([
      ask<GpuNow[string]>("gpu-scheduler.accountState"),
      ask<DbNow[string]>("dbaas.accountState"),
      ask<{ storageMb: number }>("dbaas.snapshotStorage"),
      ask<{ storageMb: number }>("inference.fileStorage"),
    ]);
    return new Map(
      clientIds.map((id) => {
        const now = { ...NOTHING_NOW, pending: [] as UsageRecord[], ...gpu[id], ...db[id] };
        // Ready snapshots and the Batch API's files count towards the account's storage (API-DECISIONS), beside its databases.
        return [id, { ...now, storageMb: now.storageMb + (snapshots[id]?.storageMb ?? 0) + (files[id]?.storageMb ?? 0) }];
      }),
    );
  }
}
