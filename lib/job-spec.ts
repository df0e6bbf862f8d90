/**
 * A GPU job, declared once. `JobSpec` is what a client asks for (the body of POST /api/gpu/jobs,
 * validated against it); the scheduler stores it, with its defaults resolved, as one document
 * (gpu_scheduler.jobs.spec, beside the few columns its queries and indexes need); placement
 * returns it as it is; it goes to the node inside `RunJob`, which the node checks with the same
 * compiled schema. A new job field is one property here, plus the code that acts on it.
 *
 * The job's environment (`env`) is part of the request but never of the stored document: its
 * values are often secrets, kept in their own column and read only to hand the job to its node.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { TOKEN_SCOPES } from "./scopes";

/** The most cards one job may ask for (`gpuCount`), and a node may be asked to run one job on. */
export const MAX_JOB_CARDS = 16;
/** The longest time limit (`timeoutSeconds`) and queue timeout a job may set: one week. */
export const MAX_JOB_SECONDS = 7 * 24 * 3600;
/** The most retries a job may ask for (`maxRetries`): a job runs at most MAX_JOB_RETRIES + 1 attempts. */
export const MAX_JOB_RETRIES = 10;
/** A preemptible job stopped this many times for waiting jobs is no longer stopped (its attempts stay bounded). */
export const MAX_JOB_PREEMPTIONS = 100;
/** The most attempts of one job: its first, its retries and the runs preemptions ended. */
export const MAX_JOB_ATTEMPTS = MAX_JOB_RETRIES + 1 + MAX_JOB_PREEMPTIONS;
/** The order of an account's own queued jobs; stored as the index (0 low, 1 normal, 2 high). */
export const PRIORITIES = ["low", "normal", "high"] as const;
export type Priority = (typeof PRIORITIES)[number];
export const priorityIndex = (priority: Priority | null | undefined): number => PRIORITIES.indexOf(priority ?? "normal");
/**
 * What a `containerImage` may look like: the characters of `[registry/]name[:tag][@digest]`. A
 * string, not a RegExp: schemas cross the bus as JSON, where a RegExp becomes `{}`.
 */
export const IMAGE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._\\-/:@]*$";
export const IMAGE_NAME_MAX = 255;
export const WEBHOOK_URL_MAX = 2048;
export const JOB_COMMAND_MAX = 64 * 1024;
/** A model deployment's id (a uuid), as a job's `deploymentId`. */
export const DEPLOYMENT_ID_SYNTAX = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
/** Job ids also name a node's log files and volumes: no path separators, bounded. */
export const JOB_ID_SYNTAX = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$";

/** A job's own environment variables (`env`): at most 64, names as a shell writes them, values ≤ 4096 characters. */
export const JOB_ENV_MAX_ENTRIES = 64;
export const JOB_ENV_VALUE_MAX = 4096;
export const JOB_ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** The platform sets these (which card a job sees): a job may not, whatever the case. */
const RESERVED_ENV = /^(NVIDIA_|CUDA_)/i;

/** An optional field a client may also send as null (meaning: absent), as the API always allowed. */
const OrAbsent = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

/** The most databases one job may reach (one login role each, CI_DATABASE_URL_0…). */
export const MAX_JOB_DATABASES = 16;

/**
 * `platformAccess` (issue 28): what the job's own `cit_` token may do (a token's scopes, lib/scopes.ts),
 * and the databases it gets a login role on. Not a secret: stored in the job's document and echoed in its detail.
 */
export const PlatformAccess = Type.Object(
  {
    scopes: Type.Array(Type.Union(TOKEN_SCOPES.map((s) => Type.Literal(s))), { minItems: 1, maxItems: TOKEN_SCOPES.length, uniqueItems: true }),
    models: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 32, uniqueItems: true, description: "Only these models" })),
    databases: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: MAX_JOB_DATABASES, uniqueItems: true, description: "Database ids of the account" }),
    ),
  },
  { additionalProperties: false, description: "The job receives CI_PLATFORM_URL, CI_PLATFORM_TOKEN and CI_DATABASE_URL_<n>, valid while it runs" },
);
export type PlatformAccessParams = Static<typeof PlatformAccess>;

/** Job arrays (issue 30): at most this many jobs in one request (`arrayCount`). */
export const MAX_ARRAY_COUNT = 10000;
/** The most dependencies one job may name (`dependsOn`). */
export const MAX_JOB_DEPENDENCIES = 64;
export const DEPENDENCY_CONDITIONS = ["succeeded", "failed", "finished"] as const;
export type DependencyCondition = (typeof DEPENDENCY_CONDITIONS)[number];
const condition = Type.Union(DEPENDENCY_CONDITIONS.map((c) => Type.Literal(c)));
const id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });

/**
 * `dependsOn` (issue 30): the job waits until each condition holds of a job of the account
 * (`jobId`) or of every job of one of its arrays (`arrayId`), and is cancelled once one can no longer hold.
 */
export const JobDependency = Type.Object(
  {
    jobId: Type.Optional(id("A job of the account")),
    arrayId: Type.Optional(id("An array of the account: the condition must hold of every job of it")),
    condition,
  },
  { additionalProperties: false, description: "Exactly one of jobId and arrayId" },
);
export type JobDependencyParams = Static<typeof JobDependency>;

const seconds = (description: string) => OrAbsent(Type.Integer({ minimum: 1, maximum: MAX_JOB_SECONDS, description }));

/** Everything a job asks for except its environment: the stored document. */
const specFields = {
  // A blank one is refused by the submission rules, with a message of its own.
  command: Type.String({ minLength: 1, maxLength: JOB_COMMAND_MAX, description: "A shell command line" }),
  gpuType: OrAbsent(
    Type.String({ minLength: 1, maxLength: 200, pattern: "\\S", description: 'A card name or part of one, any case; absent or "any": any card' }),
  ),
  containerImage: OrAbsent(
    Type.String({ minLength: 1, maxLength: IMAGE_NAME_MAX, pattern: IMAGE_NAME_PATTERN, description: "Absent: the node's default image" }),
  ),
  timeoutSeconds: seconds("The time limit of a run (absent: JOB_TIMEOUT_S)"),
  queueTimeoutSeconds: seconds("A job not started this long after its creation is cancelled"),
  maxRetries: OrAbsent(Type.Integer({ minimum: 0, maximum: MAX_JOB_RETRIES, description: "Times a failed attempt goes back to the queue" })),
  priority: OrAbsent(Type.Union(PRIORITIES.map((p) => Type.Literal(p)))),
  gpuCount: OrAbsent(Type.Integer({ minimum: 1, maximum: MAX_JOB_CARDS, description: "Cards of one type on one node (default 1)" })),
  webhookUrl: OrAbsent(Type.String({ maxLength: WEBHOOK_URL_MAX, description: "Receives a signed POST at the job's terminal status" })),
  platformAccess: OrAbsent(PlatformAccess),
  preemptible: OrAbsent(
    Type.Boolean({
      description: "Runs only on cards no other job waits for, stopped and queued again when one does; GPU-seconds at PREEMPTIBLE_CREDIT_FACTOR",
    }),
  ),
  arrayCount: OrAbsent(
    Type.Integer({ minimum: 1, maximum: MAX_ARRAY_COUNT, description: "Creates this many jobs at once (an array); each sees CI_ARRAY_INDEX and CI_ARRAY_ID" }),
  ),
  arrayParallelism: OrAbsent(
    Type.Integer({ minimum: 1, maximum: MAX_ARRAY_COUNT, description: "At most this many jobs of the array run at once (≤ arrayCount)" }),
  ),
  dependsOn: OrAbsent(Type.Array(JobDependency, { maxItems: MAX_JOB_DEPENDENCIES, description: "The job waits until each condition holds" })),
  // Set by the platform only (a deployment's replica, issue 29): a client's POST /api/gpu/jobs with either is 400.
  deploymentId: OrAbsent(Type.String({ pattern: DEPLOYMENT_ID_SYNTAX, description: "The model deployment this job is a replica of (set by the platform)" })),
  servePort: OrAbsent(
    Type.Integer({
      minimum: 1024,
      maximum: 65535,
      description: "The port inside the job its node relays the platform's HTTP requests to (set by the platform)",
    }),
  ),
};

/** The fields only the platform sets on a job (a deployment's replica); a client sending one is refused. */
export const PLATFORM_ONLY_FIELDS = ["deploymentId", "servePort"] as const;

/** The job's variables: names and values are checked by `jobEnvProblem` (messages that never show a value). */
const envField = Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "The job's environment variables (values are never returned)" }));

/** The body of POST /api/gpu/jobs. */
export const JobSpec = Type.Object({ ...specFields, env: envField }, { additionalProperties: false });
export type JobRequest = Static<typeof JobSpec>;

/** The stored document: the request without `env`, defaults resolved, nulls dropped. */
export const StoredJobSpec = Type.Object(specFields, { additionalProperties: false });
/** `timeoutSeconds` is set for every job stored since jobs had their own limit (absent: the node's JOB_TIMEOUT_S). */
export type StoredJob = Static<typeof StoredJobSpec>;

/**
 * `gpu-node.run`: the placement (which cards, which attempt) and the job as stored, with its
 * environment. `gpuUuids`: every card of the job, the first being `gpuUuid`. Extra fields are
 * dropped, not refused, so a node tolerates a newer scheduler during a rolling upgrade.
 */
/**
 * What a job with `platformAccess` gets to reach the platform (issue 28), made by the scheduler
 * for this attempt and handed to its node only in the run call (never stored): its `cit_` token,
 * and per allowed database (in `platformAccess.databases` order) the login role made for the job.
 * The node turns them into CI_PLATFORM_URL, CI_PLATFORM_TOKEN and CI_DATABASE_URL_<n> pointing at
 * its relay.
 */
export const PlatformGrant = Type.Object(
  {
    token: Type.String({ pattern: "^cit_[a-z0-9]{32}$" }),
    databases: Type.Array(
      Type.Object(
        {
          database: Type.String({ minLength: 1, maxLength: 63 }),
          user: Type.String({ minLength: 1, maxLength: 63 }),
          password: Type.String({ minLength: 1, maxLength: 256 }),
        },
        { additionalProperties: false },
      ),
      { maxItems: 16 },
    ),
  },
  { additionalProperties: false },
);
export type PlatformGrantParams = Static<typeof PlatformGrant>;

export const RunJob = Type.Object({
  jobId: Type.String({ pattern: JOB_ID_SYNTAX }),
  gpuUuid: Type.String({ minLength: 1, maxLength: 128 }),
  gpuUuids: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { minItems: 1, maxItems: MAX_JOB_CARDS })),
  /** Which attempt of the job this is, 1-based; absent: 1. Events carry it back. */
  attempt: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_JOB_ATTEMPTS })),
  ...specFields,
  env: envField,
  platform: Type.Optional(PlatformGrant),
});
export type RunJobParams = Static<typeof RunJob>;

export const checkRunJob = TypeCompiler.Compile(RunJob);

/**
 * Why `env` is not a job environment, or null. The messages name variables, never their values
 * (they often hold tokens). Checked by the scheduler (400) and again by the node.
 */
export function jobEnvProblem(env: unknown): string | null {
  if (typeof env !== "object" || env === null || Array.isArray(env)) return "The 'env' field must be an object of variable names to string values.";
  const entries = Object.entries(env);
  if (entries.length > JOB_ENV_MAX_ENTRIES) return `The 'env' field holds ${entries.length} variables; at most ${JOB_ENV_MAX_ENTRIES} are allowed.`;
  for (const [name, value] of entries) {
    const shown = JSON.stringify(name.slice(0, 140));
    if (!JOB_ENV_NAME.test(name)) return `The 'env' variable name ${shown} is not allowed: letters, digits and _, not starting with a digit, at most 128.`;
    if (RESERVED_ENV.test(name)) return `The 'env' variable ${shown} is not allowed: NVIDIA_* and CUDA_* are set by the platform.`;
    if (typeof value !== "string") return `The 'env' variable ${shown} must have a string value.`;
    if (value.length > JOB_ENV_VALUE_MAX) return `The value of the 'env' variable ${shown} is longer than ${JOB_ENV_VALUE_MAX} characters.`;
  }
  return null;
}

/**
 * The document stored for a request: nulls dropped (null meant absent), `gpuType` trimmed, and
 * the time limit resolved (`defaultTimeoutS`: JOB_TIMEOUT_S), so a later change of the default
 * does not change a queued job. `gpuType` "any" is kept as asked; placement reads it as any card.
 */
export function storedJob(request: JobRequest, defaultTimeoutS: number): StoredJob {
  const { env: _env, ...fields } = request;
  const stored = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== null && v !== undefined)) as Static<typeof StoredJobSpec>;
  if (typeof stored.gpuType === "string") stored.gpuType = stored.gpuType.trim();
  return { ...stored, timeoutSeconds: stored.timeoutSeconds ?? defaultTimeoutS };
}
