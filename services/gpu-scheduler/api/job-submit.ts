/**
 * POST /api/gpu/jobs, the shell around the submission rules (submission.ts): it reads the facts
 * (the cluster view now, the account's running-GPU limit), applies the rules, checks the webhook
 * URL (the account's secret from auth, the target's addresses from DNS), then queues the job:
 * batched (batcher.ts, admission.ts) or, with an Idempotency-Key, in its own transaction.
 */
import { randomUUID } from "crypto";
import type { Context } from "moleculer";
import { apiError, fromDataError, notFound, validationFailed } from "../../../lib/errors";
import type { PlatformAccessParams } from "../../../lib/job-spec";
import { respondCreated } from "../../../lib/http-meta";
import type { CallerMeta } from "../../../lib/identity";
import type { QuotaResource } from "../../../lib/usage-protocol";
import { GPU_MONTHLY } from "./account-limits";
import type { Refusal } from "../core/admission";
import { dnsLookup, SchedulerApp } from "../app";
import type { CreatedArray, CreatedJob } from "../contract";
import { isGroup, submitGroup } from "./group-submit";
import { checkIdempotencyKey, IDEMPOTENCY_HEADER, requestHash } from "./idempotency";
import type { NewJob } from "../store/job-row";
import { checkSubmission, CreateJobParams, SubmissionFacts } from "./submission";
import { checkAccess } from "./platform-access";
import { resolveTarget } from "../webhooks/webhook-target";

type CreateCtx = Context<CreateJobParams, CallerMeta>;
/** What a submission reads of its context: the job, and the caller's meta (where the answer's status and headers go too). */
export type SubmitRequest = Pick<CreateCtx, "params" | "meta">;

/** `forAccount`: a job the platform submits for an account (a model deployment's replica), not a client's request. */
export async function submitJob(app: SchedulerApp, ctx: SubmitRequest, forAccount?: string): Promise<CreatedJob | CreatedArray> {
  const key = forAccount === undefined ? checkIdempotencyKey(ctx.meta.idempotencyKey) : undefined;
  const job = await checkJobBody(app, ctx, ctx.params, { forAccount });
  // An array or a job with dependencies: one transaction of its own, keyed or not (group-submit.ts).
  if (isGroup(ctx.params)) return submitGroup(app, ctx, key, job, { monthly: (c) => checkMonthly(app, c), quotaExceeded });
  // Keyed requests take their own transaction (a replay answers even at the queued-jobs cap); the others stay on the batched inserts.
  if (key !== undefined) return createKeyed(app, ctx, key, job);
  // At or over a monthly quota a job uses up: 403 before anything is queued (a keyed replay still gets its first answer).
  await checkMonthly(app, job.clientId);
  const outcome = await app.inserts.push(job);
  if ("refused" in outcome) throw quotaExceeded(outcome.refused);
  void app.scheduler.schedule({ newJob: true });
  respondCreated(ctx.meta, `/api/gpu/jobs/${job.id}`);
  return { id: job.id, status: "queued", queuePosition: outcome.position };
}

/**
 * A job body as POST /api/gpu/jobs checks it beyond its schema (the submission rules, the webhook
 * URL, platform access): the job to queue, or the 400/404. `prefix`: where the body sits in the
 * request (a schedule's "job."), for the fields the errors name; `forAccount`: made by the platform
 * for that account (a deployment's replica), not by the caller.
 */
export async function checkJobBody(
  app: SchedulerApp,
  ctx: Pick<SubmitRequest, "meta">,
  params: CreateJobParams,
  { prefix = "", forAccount }: { prefix?: string; forAccount?: string } = {},
): Promise<NewJob> {
  const clientId = forAccount ?? ctx.meta.caller!.clientId;
  const runningGpus = await runningGpuLimit(app, clientId, params.gpuCount ?? 1);
  const submitted = checkSubmission(params, submissionFacts(app, runningGpus), { id: randomUUID(), clientId, platform: forAccount !== undefined });
  if (!submitted.ok) throw validationFailed(submitted.errors.map((e) => ({ ...e, field: prefix + e.field })));
  try {
    if (params.webhookUrl != null) await checkWebhookUrl(app, clientId, params.webhookUrl);
    if (params.platformAccess != null) await checkPlatformAccess(app, ctx, params.platformAccess);
  } catch (err) {
    const e = err as { data?: unknown };
    if (prefix && Array.isArray(e.data)) e.data = e.data.map((d: { field?: string }) => ({ ...d, field: prefix + (d.field ?? "") }));
    throw err;
  }
  return submitted.job;
}

/** The account's running-GPU limit, read only when the job asks for more than one card (null: none, or not needed). */
async function runningGpuLimit(app: SchedulerApp, clientId: string, gpuCount: number): Promise<number | null> {
  return gpuCount > 1 ? (await app.limits.limitsFor([clientId])).get(clientId)!.runningGpus : null;
}

/** The cluster as this replica sees it now (read in the same tick as the rules apply; the card names only if a rule asks). */
function submissionFacts(app: SchedulerApp, runningGpus: number | null): SubmissionFacts {
  const { view } = app.scheduler;
  let cardNames: readonly string[] | undefined;
  return {
    get cardNames() {
      return (cardNames ??= view.cardNames());
    },
    warmingUp: app.scheduler.warmingUp(),
    mostCardsOnOneNode: (gpuType) => view.mostCardsOnOneNode(gpuType),
    runningGpus,
    allowedRegistries: app.config.allowedRegistries,
    defaultTimeoutS: app.config.jobTimeoutS,
  };
}

/** 400 naming `webhookUrl`: not an absolute http(s) URL, the account has no secret, or (unless WEBHOOK_ALLOW_PRIVATE) a private target. */
async function checkWebhookUrl(app: SchedulerApp, clientId: string, url: string): Promise<void> {
  const refuse = (message: string) => validationFailed([{ field: "webhookUrl", message }]);
  const { secret } = await app.broker.call<{ secret: string | null }, { clientId: string }>("auth.webhookSecret", { clientId });
  const target = await resolveTarget(url, dnsLookup, app.config.webhooks.allowPrivate);
  if (!target.ok) throw refuse(`The 'webhookUrl' field ${target.reason}.`);
  if (!secret) throw refuse("The account has no webhook signing secret: create one with POST /api/auth/webhook-secret first.");
}

/** 400 beyond the caller's own token; 404 for a database that is not the account's (dbaas says). */
async function checkPlatformAccess(app: SchedulerApp, ctx: Pick<SubmitRequest, "meta">, access: PlatformAccessParams): Promise<void> {
  checkAccess(ctx.meta.caller!, access);
  const databaseIds = access.databases ?? [];
  if (!databaseIds.length) return;
  const clientId = ctx.meta.caller!.clientId;
  await app.broker.call("dbaas.checkJobDatabases", { clientId, databaseIds }).catch((err) => {
    // dbaas's own 404 (its message as ours); dbaas not running is not a missing database.
    const e = err as { code?: unknown; name?: string };
    throw e.code === 404 && e.name !== "ServiceNotFoundError" ? notFound("Database") : err;
  });
}

/** A submission with an Idempotency-Key: the job and the key in one transaction, or the first answer again. */
async function createKeyed(app: SchedulerApp, ctx: SubmitRequest, key: string, job: NewJob): Promise<CreatedJob> {
  const request = { clientId: job.clientId, key, requestHash: requestHash(ctx.params) };
  const limit = (await app.limits.limitsFor([job.clientId])).get(job.clientId)!.queuedJobs;
  const mayCreate = () => checkMonthly(app, job.clientId);
  const outcome = await app.idempotency.createOnce(request, job, app.clock.now(), app.keysExpireBefore(), limit, quotaExceeded, mayCreate).catch((err) => {
    throw fromDataError(err);
  });
  if (outcome.kind === "reused") throw apiError("IDEMPOTENCY_KEY_REUSED", `This ${IDEMPOTENCY_HEADER} was already used with a different request body`);
  if (outcome.kind === "created") void app.scheduler.schedule({ newJob: true });
  else ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, "Idempotent-Replayed": "true" };
  respondCreated(ctx.meta, `/api/gpu/jobs/${outcome.body.id}`);
  ctx.meta.$statusCode = outcome.status;
  return outcome.body;
}

/** 403 QUOTA_EXCEEDED when the account is at or over a monthly quota a job uses up (credits, GPU-seconds). */
async function checkMonthly(app: SchedulerApp, clientId: string): Promise<void> {
  await app.gate.check(clientId, GPU_MONTHLY as QuotaResource[]);
}

/** 403 QUOTA_EXCEEDED: the account already has its limit of queued jobs (admission.ts). */
function quotaExceeded({ limit, used }: Refusal): Error {
  return apiError("QUOTA_EXCEEDED", `An account may have at most ${limit} queued GPU jobs`, { resource: "queuedJobs", limit, used });
}
