/** The GPU routes' responses (lib/contract.ts): published in the OpenAPI document and typing the handlers. */
import { Nullable, OrNull, type Static, StringEnum, Type } from "../../lib/contract";
import { JobSpec, MAX_JOB_CARDS, type StoredJob, StoredJobSpec } from "../../lib/job-spec";

export const JobStatus = StringEnum(["queued", "running", "completed", "failed", "cancelled"], { $id: "JobStatus" });

export const JobCreated = Type.Object(
  {
    id: Type.String(),
    status: JobStatus,
    queuePosition: Type.Integer({ minimum: 1, description: "1 means next to start" }),
  },
  { $id: "JobCreated" },
);
export type CreatedJob = Static<typeof JobCreated>;

/** POST /api/gpu/jobs with `arrayCount`: the array and its jobs, in index order. */
export const ArrayCreated = Type.Object(
  {
    arrayId: Type.String(),
    jobIds: Type.Array(Type.String(), { description: "The array's jobs: jobIds[i] sees CI_ARRAY_INDEX=i" }),
    status: JobStatus,
  },
  { $id: "ArrayCreated" },
);
export type CreatedArray = Static<typeof ArrayCreated>;

/** GET /api/gpu/arrays/:id. */
export const JobArray = Type.Object(
  {
    id: Type.String(),
    total: Type.Integer({ minimum: 1 }),
    counts: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), { description: "Jobs of the array by status (statuses with none are absent)" }),
    jobIds: Type.Array(Type.String(), { description: "In index order" }),
  },
  { $id: "JobArray" },
);
export type JobArrayView = Static<typeof JobArray>;

const dateTime = () => Type.String({ format: "date-time" });

/** The fields of the job's document (lib/job-spec.ts) this response shows in forms of its own; any other is returned as submitted. */
export const SHOWN_SPEC_FIELDS = [
  "command",
  "gpuType",
  "containerImage",
  "timeoutSeconds",
  "queueTimeoutSeconds",
  "maxRetries",
  "priority",
  "gpuCount",
  "webhookUrl",
] as const satisfies ReadonlyArray<keyof StoredJob>;

const JobOwn = Type.Object({
  id: Type.String(),
  status: JobStatus,
  gpuType: Type.String({ description: 'The requested type (or "any") until a card is assigned, then its name' }),
  gpuSecondsUsed: Type.Number({
    minimum: 0,
    description: "Wall seconds the job has run, from startedAt, times its gpuCount (every attempt's); 0 until it starts",
  }),
  gpuCount: Type.Integer({ minimum: 1, maximum: MAX_JOB_CARDS, description: "As submitted (default 1): cards of one type on one node, all seen by the job" }),
  createdAt: dateTime(),
  startedAt: Nullable(
    Type.String({
      format: "date-time",
      description: "When its container or process really started (after any image pull); null until then, and for a job that ended before starting",
    }),
  ),
  completedAt: Nullable(dateTime()),
  result: OrNull(
    Type.Object({
      exitCode: Nullable(Type.Integer()),
      output: Type.String({
        description:
          "The true last 64 KiB of stdout+stderr, as readable text (bytes that are not UTF-8, and NUL, show as U+FFFD); headed by a truncation note when the node's log cap cut the output",
      }),
      outputBase64: Type.Optional(
        Type.String({
          format: "byte",
          description: "Present only when `output` is not exactly the job's bytes (NUL, invalid UTF-8): those bytes, losslessly",
        }),
      ),
    }),
  ),
  errorMessage: Nullable(Type.String()),
  command: Type.String({ description: "As submitted" }),
  containerImage: Nullable(Type.String({ description: "As submitted; null: the node's default image" })),
  timeoutSeconds: Type.Integer({
    minimum: 1,
    description: 'The time limit of a run, in seconds (as submitted, or JOB_TIMEOUT_S): a job running longer is stopped and failed ("time limit")',
  }),
  envNames: Type.Array(Type.String(), {
    maxItems: 64,
    description: "The names of the job's environment variables (`env`), sorted; their values are never returned",
  }),
  queueTimeoutSeconds: Nullable(
    Type.Integer({
      minimum: 1,
      description: 'As submitted: a job not started this long after its creation is cancelled (statusReason "…expired…"); null: none',
    }),
  ),
  statusReason: Nullable(
    Type.String({
      description:
        'Why the job is where it is, in words: for a queued job what it waits for (e.g. "waiting for a free GPU matching \\"A100\\"", "account limit of 2 running GPUs reached"), "retry 2 of 3 in 10 s after: exit code 1" while a failed attempt waits for its retry, a queue timeout that expired; null when there is nothing to add',
    }),
  ),
  priority: StringEnum(["low", "normal", "high"], { description: "As submitted (default normal): the order of the account's own queued jobs" }),
  queuePosition: Nullable(
    Type.Integer({
      minimum: 1,
      description: "While queued: the job's 1-based place in the order the scheduler would start the queued jobs now; null otherwise",
    }),
  ),
  maxRetries: Type.Integer({
    minimum: 0,
    maximum: 10,
    description: "As submitted (default 0): how many times a failed attempt goes back to the queue (never after the time limit or a cancel)",
  }),
  attempts: Type.Integer({
    minimum: 0,
    description: "Attempts started so far (at most maxRetries + 1); the other fields describe the current or last one",
  }),
  webhookUrl: Nullable(
    Type.String({
      format: "uri",
      maxLength: 2048,
      description: "As submitted: receives a signed POST (Standard Webhooks) at the job's terminal status; null: none",
    }),
  ),
  scheduleId: Nullable(Type.String({ format: "uuid", description: "The schedule whose tick created the job; null: submitted directly" })),
  preemptions: Type.Integer({ minimum: 0, description: "Times the (preemptible) job was stopped for a waiting job and queued again; retries untouched" }),
  arrayId: Nullable(Type.String({ description: "The array the job belongs to (GET /api/gpu/arrays/:id); null: none" })),
  arrayIndex: Nullable(Type.Integer({ minimum: 0, description: "Its 0-based index in the array (CI_ARRAY_INDEX); null: none" })),
});
export const Job = Type.Composite([JobOwn, Type.Omit(StoredJobSpec, SHOWN_SPEC_FIELDS)], { $id: "Job" });
export type JobDetail = Static<typeof Job>;

export const JobList = Type.Object({ jobs: Type.Array(Job, { maxItems: 50 }) }, { $id: "JobList" });

export const Gpu = Type.Object(
  {
    name: Type.String(),
    available: Type.Boolean(),
    utilization: Type.Number({ description: "percent (0-100)" }),
    memoryUsed: Type.Number({ description: "MiB" }),
    memoryTotal: Type.Number({ description: "MiB" }),
    temperature: Type.Number({ description: "°C" }),
    uuid: Type.String({ description: "The card's UUID (nvidia-smi)" }),
    index: Type.Integer({ minimum: 0, description: "The card's index on its host" }),
    nodeId: Type.String({ description: "An opaque label of the card's host (node-<hmac8>), stable while the host is" }),
  },
  { $id: "Gpu" },
);

export const ClusterStatus = Type.Object(
  {
    cluster: Type.Object({
      totalGpus: Type.Integer({ minimum: 0 }),
      availableGpus: Type.Integer({ minimum: 0 }),
      busyGpus: Type.Integer({ minimum: 0 }),
      gpus: Type.Array(Gpu),
    }),
    queueDepth: Type.Integer({ minimum: 0, description: "Queued jobs in the whole cluster" }),
  },
  { $id: "ClusterStatus" },
);
export type ClusterStatus = Static<typeof ClusterStatus>;

export const WebhookDelivery = Type.Object(
  {
    id: Type.String({ format: "uuid", description: "The `webhook-id` header of every attempt of this delivery" }),
    type: StringEnum(["job.completed", "job.failed", "job.cancelled"]),
    jobId: Type.String({ format: "uuid" }),
    url: Type.String(),
    status: StringEnum(["pending", "delivered", "failed"], { description: "failed: no 2xx answer before its retries ran out (at least 24 hours)" }),
    attempts: Type.Integer({ minimum: 0 }),
    lastStatusCode: Nullable(Type.Integer({ description: "The receiver's HTTP status at the last attempt; null: no answer" })),
    lastError: Nullable(Type.String()),
    deliveredAt: Nullable(Type.String({ format: "date-time" })),
    nextAttemptAt: Nullable(Type.String({ format: "date-time", description: "While pending: when it is tried next" })),
  },
  { $id: "WebhookDelivery" },
);
export type WebhookDeliveryView = Static<typeof WebhookDelivery>;
export const WebhookDeliveryList = Type.Object({ deliveries: Type.Array(WebhookDelivery, { maxItems: 100 }) }, { $id: "WebhookDeliveryList" });

const CONCURRENCY = ["allow", "forbid", "replace"] as const;
const CONCURRENCY_TEXT = "A tick while the last job has not finished: allow runs anyway, forbid skips it (counted in skipped), replace cancels that job first";
/** In params: literals (the params are compiled; StringEnum is for responses only). */
const ConcurrencyParam = Type.Union(
  CONCURRENCY.map((c) => Type.Literal(c)),
  { description: CONCURRENCY_TEXT },
);
const Concurrency = StringEnum([...CONCURRENCY], { description: CONCURRENCY_TEXT });

/** POST /api/gpu/schedules (issue 30): a cron schedule of a job body (checked as POST /api/gpu/jobs checks one). */
export const ScheduleSpec = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    cron: Type.String({ minLength: 1, maxLength: 200, description: "5 fields: minute hour day-of-month month day-of-week" }),
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "An IANA time zone (default UTC)" })),
    concurrency: Type.Optional(ConcurrencyParam),
    paused: Type.Optional(Type.Boolean()),
    job: JobSpec,
  },
  { additionalProperties: false },
);
/** PATCH /api/gpu/schedules/:id: any field of the schedule. */
export const ScheduleUpdate = Type.Object({ id: Type.String({ maxLength: 64 }), ...Type.Partial(ScheduleSpec).properties }, { additionalProperties: false });

export const Schedule = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    name: Type.String(),
    cron: Type.String(),
    timezone: Type.String(),
    concurrency: Concurrency,
    paused: Type.Boolean(),
    nextRunAt: Nullable(Type.String({ format: "date-time", description: "null while paused, or when the expression never runs again" })),
    lastRunAt: Nullable(Type.String({ format: "date-time", description: "The last tick that created a job" })),
    lastJobId: Nullable(Type.String({ format: "uuid" })),
    runs: Type.Integer({ minimum: 0, description: "Jobs its ticks created" }),
    skipped: Type.Integer({ minimum: 0, description: "Ticks skipped (forbid while the last job ran, or the account's queue full)" }),
    job: Type.Omit(JobSpec, ["env"], { description: "The job body, without env values" }),
    envNames: Type.Array(Type.String(), { description: "The names of the job's env variables" }),
    createdAt: dateTime(),
    updatedAt: dateTime(),
  },
  { $id: "Schedule" },
);
export type ScheduleView = Static<typeof Schedule>;
export const ScheduleList = Type.Object({ schedules: Type.Array(Schedule, { maxItems: 100 }) }, { $id: "ScheduleList" });
