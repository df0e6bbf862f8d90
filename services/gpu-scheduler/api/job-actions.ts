/**
 * The plain (not streamed) actions over the scheduler app: a caller's jobs, cancel, webhook
 * deliveries and the cluster status, and the internal figures for usage and metrics.
 */
import type { Context } from "moleculer";
import { apiError } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { UsageRecord } from "../../../lib/usage-protocol";
import type { SchedulerApp } from "../app";
import type { ClusterStatus, JobDetail, WebhookDeliveryView } from "../contract";
import type { JobIdParams } from "./job-reader";
import { toClusterStatus } from "./job-view";
import type { AccountState } from "../store/job-row";
import { heldCardCounts, SchedulerStats } from "../stats";

/** GET /jobs lists this many, newest first. */
const LIST_LIMIT = 50;
/** GET /webhooks/deliveries lists this many, newest first. */
const DELIVERIES_LIMIT = 100;

type Ctx<P> = Context<P, CallerMeta>;
export type PendingAccountState = AccountState & { pending: UsageRecord[] };

/** GET /jobs's query: `deploymentId` lists that model deployment's replicas only. */
export type ListJobsParams = { deploymentId?: string };

export async function listJobs(app: SchedulerApp, ctx: Ctx<ListJobsParams>): Promise<{ jobs: JobDetail[] }> {
  const rows = await app.repo.listForClient(ctx.meta.caller!.clientId, LIST_LIMIT, ctx.params.deploymentId);
  return { jobs: await app.reader.details(rows) };
}

export async function getJob(app: SchedulerApp, ctx: Ctx<JobIdParams>): Promise<JobDetail> {
  return (await app.reader.details([await app.reader.own(ctx.params, ctx.meta.caller!.clientId)]))[0];
}

/** Queued and running jobs are cancelled at once; a running one is stopped on its node first. */
export async function cancelJob(app: SchedulerApp, ctx: Ctx<JobIdParams>): Promise<JobDetail> {
  const row = await app.reader.own(ctx.params, ctx.meta.caller!.clientId);
  if (!(await app.scheduler.cancel(row))) throw apiError("INVALID_STATE", `GPU job already finished (${row.status}); it cannot be cancelled`);
  return app.reader.detail((await app.repo.find(row.id))!);
}

/** The account's webhook deliveries, newest first (webhook-sender.ts). */
export async function deliveries(app: SchedulerApp, ctx: Ctx<unknown>): Promise<{ deliveries: WebhookDeliveryView[] }> {
  return { deliveries: await app.webhooks.listForClient(ctx.meta.caller!.clientId, DELIVERIES_LIMIT) };
}

export async function clusterStatus(app: SchedulerApp): Promise<ClusterStatus> {
  const [held, depth, drained] = await Promise.all([app.places.heldCards(), app.repo.queueDepth(), app.nodeBook.drained()]);
  return toClusterStatus(app.scheduler.view.cards(), held, depth, app.labeler, drained);
}

/** What each account holds and has queued now, with its ended attempts still in the usage outbox (`pending`): the ledger does not have them yet. */
export async function accountState(app: SchedulerApp, clientIds: string[]): Promise<Record<string, PendingAccountState>> {
  const [states, pending] = await Promise.all([app.repo.accountState(clientIds), app.usageOutbox.pendingOf(clientIds)]);
  const out: Record<string, PendingAccountState> = {};
  for (const [id, state] of Object.entries(states)) out[id] = { ...state, pending: [] };
  for (const r of pending) (out[r.clientId] ??= { heldGpus: 0, queuedJobs: 0, running: [], pending: [] }).pending.push(r);
  return out;
}

/** Figures for the metrics service. */
export async function stats(app: SchedulerApp): Promise<SchedulerStats> {
  const c = await app.repo.countByStatus();
  const queued = c.waiting + c.queued + c.assigned;
  return {
    queueDepth: queued,
    jobsByStatus: { queued, running: c.running, completed: c.completed, failed: c.failed, cancelled: c.cancelled },
    ...heldCardCounts(app.scheduler.view.nodeEntries()),
  };
}
