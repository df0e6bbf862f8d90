/**
 * POST /api/gpu/jobs with `arrayCount` or `dependsOn` (issue 30): the jobs in one transaction (with
 * its Idempotency-Key, if any), counted against the queued-jobs limit as the number they are, with
 * their dependencies checked (the account's own, else 404), locked and judged at once: a job whose
 * conditions all hold is queued, one with a condition undecided waits, and one with a condition
 * that can no longer hold is refused (400: it would never run).
 */
import { randomUUID } from "crypto";
import type { Context } from "moleculer";
import type { PoolClient } from "pg";
import { transaction } from "../../../lib/db";
import { apiError, fromDataError, notFound, validationFailed } from "../../../lib/errors";
import { respondCreated } from "../../../lib/http-meta";
import type { CallerMeta } from "../../../lib/identity";
import { isUuid } from "../../../lib/uuid";
import type { SchedulerApp } from "../app";
import type { CreatedArray, CreatedJob } from "../contract";
import { judgeDependencies } from "../core/dependencies";
import type { NewJob } from "../store/job-row";
import { groupRefusal, insertGroup, lockQueuedCount } from "../store/submit-group";
import { IDEMPOTENCY_HEADER, requestHash } from "./idempotency";
import type { CreateJobParams } from "./submission";

/** What a submission reads of its context (as job-submit.ts SubmitRequest). */
type SubmitRequest = Pick<Context<CreateJobParams, CallerMeta>, "params" | "meta">;

/** Whether the request creates a group (an array, or a job with dependencies) rather than one plain job. */
export const isGroup = (params: CreateJobParams): boolean => params.arrayCount != null || (params.dependsOn?.length ?? 0) > 0;

export type GroupChecks = {
  /** 403 QUOTA_EXCEEDED at a monthly quota (job-submit.ts). */
  monthly: (clientId: string) => Promise<void>;
  /** The 403 of the queued-jobs limit. */
  quotaExceeded: (refusal: { limit: number; used: number }) => Error;
};

/** Submits the group `job` heads (the first job of an array; the others are its copies with ids of their own). */
export async function submitGroup(
  app: SchedulerApp,
  ctx: SubmitRequest,
  key: string | undefined,
  job: NewJob,
  checks: GroupChecks,
): Promise<CreatedJob | CreatedArray> {
  const { clientId } = job;
  const params = ctx.params;
  const deps = params.dependsOn ?? [];
  // A malformed id names nothing of the account: 404, as another account's.
  if (deps.some((d) => !isUuid(d.jobId ?? d.arrayId ?? ""))) throw notFound("GPU job or array");
  const count = params.arrayCount ?? null;
  const jobs = count === null ? [job] : Array.from({ length: count }, (_, i) => (i === 0 ? job : { ...job, id: randomUUID() }));
  const array = count === null ? undefined : { id: randomUUID(), parallelism: params.arrayParallelism ?? null };
  const limit = (await app.limits.limitsFor([clientId])).get(clientId)!.queuedJobs;
  const now = app.clock.now();

  const create = async (tx: PoolClient): Promise<CreatedJob | CreatedArray> => {
    await checks.monthly(clientId);
    const used = await lockQueuedCount(tx, clientId);
    const refusal = groupRefusal(jobs.length, used, limit);
    if (refusal) throw checks.quotaExceeded(refusal);
    const states = deps.length ? await app.dependencies.forSubmission(tx, clientId, deps) : [];
    if (states === null) throw notFound("GPU job or array");
    const verdict = judgeDependencies(states);
    if (verdict.kind === "cancel") throw validationFailed([{ field: "dependsOn", message: `The job would never run: ${verdict.reason}.` }]);
    const waits = verdict.kind === "wait";
    await insertGroup(
      tx,
      { clientId, jobs, array, dependsOn: deps, status: waits ? "waiting" : "queued", statusReason: waits ? verdict.reason : null },
      now,
      app.dependencies,
    );
    if (array) return { arrayId: array.id, jobIds: jobs.map((j) => j.id), status: "queued" };
    const position = (await app.positions.ofCreated([{ id: job.id, clientId, ahead: used }], tx)).get(job.id) ?? 1;
    return { id: job.id, status: "queued", queuePosition: position };
  };

  let body: CreatedJob | CreatedArray;
  if (key === undefined) body = await transaction(app.db, create).catch(rethrow);
  else {
    const request = { clientId, key, requestHash: requestHash(params) };
    const outcome = await app.idempotency.claimOnce(request, job.id, now, app.keysExpireBefore(), create).catch(rethrow);
    if (outcome.kind === "reused") throw apiError("IDEMPOTENCY_KEY_REUSED", `This ${IDEMPOTENCY_HEADER} was already used with a different request body`);
    if (outcome.kind === "replayed") ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, "Idempotent-Replayed": "true" };
    ctx.meta.$statusCode = outcome.status;
    body = outcome.body;
  }
  void app.scheduler.schedule({ newJob: true });
  respondCreated(ctx.meta, "arrayId" in body ? `/api/gpu/arrays/${body.arrayId}` : `/api/gpu/jobs/${body.id}`);
  return body;
}

/** Our own errors as they are; PostgreSQL's data errors as 400. */
function rethrow(err: unknown): never {
  throw fromDataError(err);
}
