/**
 * The routes of /api/gpu/schedules (issue 30), a mixin of the gpu-scheduler service beside its
 * job routes: the bus contract of each (rest, scope, params, openapi), handed to api/schedules.ts.
 */
import type { Context, ServiceSchema } from "moleculer";
import { Type } from "../../../lib/contract";
import type { CallerMeta } from "../../../lib/identity";
import type { SchedulerService } from "../app";
import { Schedule, ScheduleList, ScheduleSpec, ScheduleUpdate, type ScheduleView } from "../contract";
import * as schedules from "./schedules";

type Ctx<P> = Context<P, CallerMeta>;
const ID_PARAMS = Type.Object({ id: Type.String({ maxLength: 64 }) });

export const ScheduleActionsMixin: Partial<ServiceSchema> = {
  actions: {
    createSchedule: {
      rest: "POST /schedules",
      auth: "required",
      scope: "jobs:write",
      openapi: {
        tag: "gpu",
        summary: "Create a cron schedule of a job",
        description:
          "Each tick (5-field cron in an IANA time zone, default UTC) creates one job from `job` (checked as POST /api/gpu/jobs checks it). " +
          "A bad cron or timezone is 400 naming the field.",
        status: 201,
        response: Schedule,
        errors: ["QUOTA_EXCEEDED"],
      },
      params: ScheduleSpec,
      handler(this: SchedulerService, ctx: Ctx<schedules.CreateScheduleParams>): Promise<ScheduleView> {
        return schedules.createSchedule(this.app, ctx);
      },
    },

    listSchedules: {
      rest: "GET /schedules",
      auth: "required",
      scope: "jobs:read",
      openapi: { tag: "gpu", summary: "The caller's schedules, newest first", status: 200, response: ScheduleList },
      handler(this: SchedulerService, ctx: Ctx<unknown>): Promise<{ schedules: ScheduleView[] }> {
        return schedules.listSchedules(this.app, ctx);
      },
    },

    getSchedule: {
      rest: "GET /schedules/:id",
      auth: "required",
      scope: "jobs:read",
      openapi: { tag: "gpu", summary: "One schedule", status: 200, response: Schedule, errors: ["NOT_FOUND"] },
      params: ID_PARAMS,
      handler(this: SchedulerService, ctx: Ctx<schedules.ScheduleIdParams>): Promise<ScheduleView> {
        return schedules.getSchedule(this.app, ctx);
      },
    },

    updateSchedule: {
      rest: "PATCH /schedules/:id",
      auth: "required",
      scope: "jobs:write",
      openapi: {
        tag: "gpu",
        summary: "Change a schedule (paused, cron, timezone, concurrency, job, name)",
        description: "A new cron or timezone, or resuming a paused schedule, computes nextRunAt again from now.",
        status: 200,
        response: Schedule,
        errors: ["NOT_FOUND"],
      },
      params: ScheduleUpdate,
      handler(this: SchedulerService, ctx: Ctx<schedules.UpdateScheduleParams>): Promise<ScheduleView> {
        return schedules.updateSchedule(this.app, ctx);
      },
    },

    deleteSchedule: {
      rest: "DELETE /schedules/:id",
      auth: "required",
      scope: "jobs:write",
      openapi: {
        tag: "gpu",
        summary: "Delete a schedule (the jobs it created stay)",
        status: 200,
        response: Type.Object({ deleted: Type.Literal(true) }),
        errors: ["NOT_FOUND"],
      },
      params: ID_PARAMS,
      handler(this: SchedulerService, ctx: Ctx<schedules.ScheduleIdParams>): Promise<{ deleted: true }> {
        return schedules.deleteSchedule(this.app, ctx);
      },
    },
  },
};
