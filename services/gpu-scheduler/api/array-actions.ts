/** GET /api/gpu/arrays/:id and POST /api/gpu/arrays/:id/cancel: an array of the caller's jobs (issue 30). */
import type { Context } from "moleculer";
import { notFound } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import { isUuid } from "../../../lib/uuid";
import type { SchedulerApp } from "../app";
import type { JobArrayView } from "../contract";
import { publicStatus } from "../core/public-status";
import type { ArrayMember } from "../store/arrays.repository";
import type { JobIdParams } from "./job-reader";

type Ctx = Context<JobIdParams, CallerMeta>;

/** The array's view: its jobs counted by the status clients see, and their ids in index order. Pure. */
export function toArrayView(id: string, total: number, members: readonly ArrayMember[]): JobArrayView {
  const counts: Record<string, number> = {};
  for (const m of members) {
    const status = publicStatus(m.status, m.started_at);
    counts[status] = (counts[status] ?? 0) + 1;
  }
  return { id, total, counts, jobIds: members.map((m) => m.id) };
}

/** The caller's array; another account's, or a malformed id, is the same 404. */
async function own(app: SchedulerApp, ctx: Ctx): Promise<{ id: string; total: number }> {
  const array = isUuid(ctx.params.id) ? await app.arrays.findForClient(ctx.params.id, ctx.meta.caller!.clientId) : undefined;
  if (!array) throw notFound("GPU job array");
  return array;
}

export async function getArray(app: SchedulerApp, ctx: Ctx): Promise<JobArrayView> {
  const array = await own(app, ctx);
  return toArrayView(array.id, array.total, await app.arrays.members(array.id));
}

/** Cancels every job of the array not finished yet (none left: the view as it is, 200). */
export async function cancelArray(app: SchedulerApp, ctx: Ctx): Promise<JobArrayView> {
  const array = await own(app, ctx);
  await app.scheduler.cancelArray(array.id, "the array was cancelled");
  return toArrayView(array.id, array.total, await app.arrays.members(array.id));
}
