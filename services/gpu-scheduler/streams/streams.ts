/**
 * The streamed answers of a job (lib/paged-body.ts): its log (`logs`, `logsPage`), a followed log
 * (`followPage`, `followStop`, log-follow.ts), its artifacts, and its status as server-sent events
 * (`events`, `eventsPage`, job-watch.ts). Each first action answers the first page and names the
 * action the gateway asks for the next ones as the client reads; every page is the caller's job only.
 */
import { randomUUID } from "crypto";
import type { Context } from "moleculer";
import { apiError, notFound } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { BodyPage, PagedBodyMeta } from "../../../lib/paged-body";
import { isUuid } from "../../../lib/uuid";
import type { SchedulerApp } from "../app";
import type { JobIdParams } from "../api/job-reader";
import { earlierAttempt, lastAttempt, LogCursor, LogTarget } from "./job-logs";
import { EventsCursor, nextEventsPage, statusEventPage } from "./job-watch";
import type { JobRow } from "../store/job-row";
import type { FollowCursor, FollowedJob } from "./log-follow";
import { isTerminal } from "../core/transitions";

/** `attempt`: 1-based; absent: the last one. */
export type JobLogsParams = JobIdParams & { attempt?: number; follow?: boolean };
export type PagedMeta = CallerMeta & PagedBodyMeta & { $responseType?: string };
type Ctx<P, M extends object = CallerMeta> = Context<P, M>;

const TEXT = "text/plain; charset=utf-8";
/** Live streams: no cache may hold them, no proxy buffer them. */
const LIVE_HEADERS = { "Cache-Control": "no-cache", "X-Accel-Buffering": "no" };

/** A streamed answer: its first page now, the next ones from `action` as the client reads (lib/paged-body.ts). */
function pagedAnswer(ctx: Ctx<unknown, PagedMeta>, first: BodyPage, contentType: string, action = "gpu-scheduler.logsPage", stop?: string): BodyPage {
  ctx.meta.$responseType = contentType;
  ctx.meta.$pagedBody = { action, ...(stop && { stop }) };
  return first;
}

/** What following needs of a job's row (log-follow.ts). */
const followedJob = (row: JobRow): FollowedJob => ({ id: row.id, status: row.status, attempts: row.attempts, nodeId: row.node_id });

const ownJob = (app: SchedulerApp, ctx: Ctx<JobIdParams>) => app.reader.own(ctx.params, ctx.meta.caller!.clientId);

/** The caller's followed job (cached a second, followed-jobs); another account's is 404. */
async function ownFollowed(app: SchedulerApp, ctx: Ctx<FollowCursor>): Promise<FollowedJob> {
  const job = isUuid(ctx.params.id) ? await app.followed.get(ctx.params.id, ctx.meta.caller!.clientId) : undefined;
  if (!job) throw notFound("GPU job");
  return job;
}

/** Whose log `?attempt=N` reads: the last attempt is the job's row, an earlier one its kept record; one not started is 404. */
async function logTarget(app: SchedulerApp, ctx: Ctx<JobLogsParams>): Promise<LogTarget> {
  const row = await ownJob(app, ctx);
  const attempt = ctx.params.attempt;
  if (attempt === undefined || attempt === row.attempts) return lastAttempt(row, attempt);
  const kept = attempt < row.attempts ? await app.repo.attempt(row.id, attempt) : undefined;
  if (!kept) throw notFound(`Attempt ${attempt} of the GPU job`);
  return earlierAttempt(row.id, kept);
}

/** The job's whole output (`follow`: and what it prints from now on, as it prints it). */
export async function logs(app: SchedulerApp, ctx: Ctx<JobLogsParams, PagedMeta>): Promise<BodyPage> {
  const row = ctx.params.follow ? await ownJob(app, ctx) : undefined;
  // A finished job has nothing more to follow: its whole output, as without `follow`.
  if (!row || isTerminal(row.status)) return pagedAnswer(ctx, await app.jobLogs.first(await logTarget(app, ctx)), TEXT);
  const attempt = ctx.params.attempt ?? Math.max(row.attempts, 1);
  if (attempt > Math.max(row.attempts, 1)) throw notFound(`Attempt ${attempt} of the GPU job`);
  const cursor: FollowCursor = { id: row.id, fid: randomUUID(), attempt, offset: 0 };
  ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, ...LIVE_HEADERS };
  const first = await app.follow.page(followedJob(row), cursor, 0);
  return pagedAnswer(ctx, first, TEXT, "gpu-scheduler.followPage", "gpu-scheduler.followStop");
}

/** The next page of a followed log: new output, waiting up to GPU_FOLLOW_WAIT_MS for some. */
export async function followPage(app: SchedulerApp, ctx: Ctx<FollowCursor>): Promise<BodyPage> {
  return app.follow.page(await ownFollowed(app, ctx), ctx.params, app.config.followWaitMs);
}

/** The client of a followed log left: the node ends the page wait in flight at once. */
export async function followStop(app: SchedulerApp, ctx: Ctx<FollowCursor>): Promise<{ stopped: true }> {
  await app.follow.stop(await ownFollowed(app, ctx), ctx.params);
  return { stopped: true };
}

/** The first page of the tar of what the job left under /out; 404 while there is none. */
export async function artifacts(app: SchedulerApp, ctx: Ctx<JobIdParams, PagedMeta>): Promise<BodyPage> {
  const page = await app.jobLogs.firstArtifacts(lastAttempt(await ownJob(app, ctx)));
  if (!page) throw apiError("NOT_FOUND", "The GPU job has no artifacts (yet): files it leaves under /out are kept when it ends");
  return pagedAnswer(ctx, page, "application/x-tar");
}

/** The next page of a `logs` or `artifacts` answer. */
export async function logsPage(app: SchedulerApp, ctx: Ctx<LogCursor>): Promise<BodyPage> {
  return app.jobLogs.page(await logTarget(app, ctx), ctx.params.source, ctx.params.offset);
}

/** The job's detail now as the first `status` event; the next ones from `eventsPage`. */
export async function events(app: SchedulerApp, ctx: Ctx<JobIdParams, PagedMeta>): Promise<BodyPage> {
  const first = statusEventPage((await app.reader.details([await ownJob(app, ctx)]))[0]);
  ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, ...LIVE_HEADERS };
  return pagedAnswer(ctx, first, "text/event-stream; charset=utf-8", "gpu-scheduler.eventsPage");
}

/** The next event (or a keep-alive after GPU_EVENTS_KEEPALIVE_MS). */
export async function eventsPage(app: SchedulerApp, ctx: Ctx<EventsCursor>): Promise<BodyPage> {
  const read = async () => (await app.reader.details([await ownJob(app, ctx)]))[0];
  return nextEventsPage(ctx.params, read, app.watch, app.config.eventsKeepAliveMs);
}
