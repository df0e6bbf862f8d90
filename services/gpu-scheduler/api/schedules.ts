/**
 * /api/gpu/schedules (issue 30): an account's cron schedules of a job. The job body is checked
 * as POST /api/gpu/jobs checks it (JobSpec, then the submission rules), the cron expression and
 * time zone by core/cron.ts; another account's schedule is the same 404 as a missing one.
 */
import { randomUUID } from "crypto";
import type { Context } from "moleculer";
import { apiError, notFound, validationFailed } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { JobRequest } from "../../../lib/job-spec";
import { respondCreated } from "../../../lib/http-meta";
import { isUuid } from "../../../lib/uuid";
import type { SchedulerApp } from "../app";
import type { ScheduleView } from "../contract";
import { isTimeZone, nextRun, parseCron } from "../core/cron";
import type { Concurrency, ScheduleChange, ScheduleRow } from "../store/schedules.repository";
import { checkJobBody } from "./job-submit";

/**
 * Fields a schedule's job may not have: a tick makes one job, not an array, with nothing to wait
 * for (each run's dependencies would be gone), and only the platform makes a deployment's replicas.
 */
export const NOT_IN_SCHEDULED_JOB = ["arrayCount", "arrayParallelism", "dependsOn", "deploymentId", "servePort"] as const;

/** The most schedules one account may have. */
export const MAX_SCHEDULES_PER_ACCOUNT = 100;
const LIST_LIMIT = 100;

export type CreateScheduleParams = { name: string; cron: string; timezone?: string; concurrency?: Concurrency; paused?: boolean; job: JobRequest };
export type UpdateScheduleParams = { id: string } & Partial<Omit<CreateScheduleParams, "job">> & { job?: JobRequest };
export type ScheduleIdParams = { id: string };

type Ctx<P> = Context<P, CallerMeta>;
const iso = (d: Date | null) => (d ? d.toISOString() : null);

export const toScheduleView = (r: ScheduleRow): ScheduleView => ({
  id: r.id,
  name: r.name,
  cron: r.cron,
  timezone: r.timezone,
  concurrency: r.concurrency,
  paused: r.paused,
  nextRunAt: r.paused ? null : iso(r.next_run_at),
  lastRunAt: iso(r.last_run_at),
  lastJobId: r.last_job_id,
  runs: r.runs,
  skipped: r.skipped,
  job: r.job,
  envNames: Object.keys(r.env ?? {}).sort(),
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** The next run of `cron` in `timezone` after `now`; a 400 naming the field that is wrong. */
function nextOf(cron: string, timezone: string, now: Date): Date {
  const parsed = parseCron(cron);
  if (!parsed.ok) throw validationFailed([{ field: "cron", message: `The 'cron' field is not a cron expression: ${parsed.message}.` }]);
  if (!isTimeZone(timezone))
    throw validationFailed([{ field: "timezone", message: `The 'timezone' field is not an IANA time zone (e.g. "Europe/Berlin", "UTC").` }]);
  const next = nextRun(parsed.cron, timezone, now);
  if (!next) throw validationFailed([{ field: "cron", message: "The 'cron' field never matches a date (e.g. February 30)." }]);
  return next;
}

/** A schedule's job checked as POST /api/gpu/jobs checks one, less what a tick cannot make: a 400 naming `job.<field>`. */
async function checkScheduledJob(app: SchedulerApp, ctx: Ctx<unknown>, job: JobRequest): Promise<void> {
  const field = NOT_IN_SCHEDULED_JOB.find((f) => job[f] != null);
  if (field)
    throw validationFailed([{ field: `job.${field}`, message: `The 'job.${field}' field is not allowed in a schedule's job (each run makes one job).` }]);
  await checkJobBody(app, ctx, job, { prefix: "job." });
}

/** The job body split as stored: the document without env, and env apart. */
const splitJob = ({ env, ...job }: JobRequest) => ({ job, env: env && Object.keys(env).length ? (env as Record<string, string>) : null });

async function own(app: SchedulerApp, id: string, clientId: string): Promise<ScheduleRow> {
  const row = isUuid(id) ? await app.schedules.findForClient(id, clientId) : undefined;
  if (!row) throw notFound("Schedule");
  return row;
}

export async function createSchedule(app: SchedulerApp, ctx: Ctx<CreateScheduleParams>): Promise<ScheduleView> {
  const clientId = ctx.meta.caller!.clientId;
  const { name, cron, timezone = "UTC", concurrency = "forbid", paused = false } = ctx.params;
  const now = app.clock.now();
  const next = nextOf(cron, timezone, now);
  await checkScheduledJob(app, ctx, ctx.params.job);
  if ((await app.schedules.countForClient(clientId)) >= MAX_SCHEDULES_PER_ACCOUNT)
    throw apiError("QUOTA_EXCEEDED", `An account may have at most ${MAX_SCHEDULES_PER_ACCOUNT} schedules`, {
      resource: "schedules",
      limit: MAX_SCHEDULES_PER_ACCOUNT,
    });
  const row = await app.schedules.insert({
    id: randomUUID(),
    client_id: clientId,
    name,
    cron,
    timezone,
    concurrency,
    ...splitJob(ctx.params.job),
    paused,
    next_run_at: next,
    created_at: now,
    updated_at: now,
  });
  respondCreated(ctx.meta, `/api/gpu/schedules/${row.id}`);
  return toScheduleView(row);
}

export async function listSchedules(app: SchedulerApp, ctx: Ctx<unknown>): Promise<{ schedules: ScheduleView[] }> {
  return { schedules: (await app.schedules.listForClient(ctx.meta.caller!.clientId, LIST_LIMIT)).map(toScheduleView) };
}

export async function getSchedule(app: SchedulerApp, ctx: Ctx<ScheduleIdParams>): Promise<ScheduleView> {
  return toScheduleView(await own(app, ctx.params.id, ctx.meta.caller!.clientId));
}

/** A change of the expression, zone or pause computes the next run again, from now. */
export async function updateSchedule(app: SchedulerApp, ctx: Ctx<UpdateScheduleParams>): Promise<ScheduleView> {
  const clientId = ctx.meta.caller!.clientId;
  const current = await own(app, ctx.params.id, clientId);
  const { id, job, ...fields } = ctx.params;
  const now = app.clock.now();
  const change: ScheduleChange = { ...fields };
  const cron = fields.cron ?? current.cron;
  const timezone = fields.timezone ?? current.timezone;
  if (fields.cron !== undefined || fields.timezone !== undefined || fields.paused === false) change.next_run_at = nextOf(cron, timezone, now);
  if (job) {
    await checkScheduledJob(app, ctx, job);
    Object.assign(change, splitJob(job));
  }
  const row = await app.schedules.update(id, clientId, change, now);
  if (!row) throw notFound("Schedule");
  return toScheduleView(row);
}

export async function deleteSchedule(app: SchedulerApp, ctx: Ctx<ScheduleIdParams>): Promise<{ deleted: true }> {
  if (!isUuid(ctx.params.id) || !(await app.schedules.remove(ctx.params.id, ctx.meta.caller!.clientId))) throw notFound("Schedule");
  return { deleted: true };
}
