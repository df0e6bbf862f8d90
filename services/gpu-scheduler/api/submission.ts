/**
 * The submission rules of a GPU job: the request's params and the cluster's facts → the job to
 * queue, or the field that is wrong. Pure: the shell (job-submit.ts) reads the facts first and
 * does the checks that need I/O (the webhook URL's secret and DNS) once these pass.
 */
import type { FieldError } from "../../../lib/errors";
import { jobEnvProblem, type JobRequest, PLATFORM_ONLY_FIELDS, storedJob } from "../../../lib/job-spec";
import { checkImage } from "../../../lib/registry-policy";
import { matchingNames, requestedGpuType } from "../core/gpu-type";
import type { NewJob } from "../store/job-row";

/** The body of POST /api/gpu/jobs, as the action's params (JobSpec) validated it. */
export type CreateJobParams = JobRequest;

/** What the rules need to know of the cluster and the account when the job is submitted. */
export type SubmissionFacts = {
  /** Distinct card names heard now (ClusterView.cardNames). */
  cardNames: readonly string[];
  /** Just after a start not every live node has announced itself: an unknown type or count waits instead. */
  warmingUp: boolean;
  /** The most cards of one name matching `gpuType` on any one node (ClusterView.mostCardsOnOneNode). */
  mostCardsOnOneNode(gpuType: string | null): number;
  /** The account's running-GPU limit (QUOTA_RUNNING_GPUS or its override); null: none. */
  runningGpus: number | null;
  /** GPU_ALLOWED_REGISTRIES. */
  allowedRegistries: string[];
  /** JOB_TIMEOUT_S: the limit of a job that sets none. */
  defaultTimeoutS: number;
};

/** The job's own values, chosen outside the rules (a random id, the signed caller; `platform`: made by the platform itself, a deployment's replica). */
export type SubmissionIds = { id: string; clientId: string; platform?: boolean };

/** The job to queue, or the first rule it breaks (as a 400's details: one field). */
export type Submitted = { ok: true; job: NewJob } | { ok: false; errors: FieldError[] };

const refuse = (field: string, message: string, extra?: Record<string, unknown>): Submitted => ({ ok: false, errors: [{ field, message, ...extra }] });

/** The rules in the order they were always checked: the first broken one is the answer. */
export function checkSubmission(params: CreateJobParams, facts: SubmissionFacts, ids: SubmissionIds): Submitted {
  const { command, containerImage } = params;
  if (!/\S/.test(command)) return refuse("command", "The 'command' field must not be blank.");
  const platformOnly = ids.platform ? undefined : PLATFORM_ONLY_FIELDS.find((field) => params[field] != null);
  if (platformOnly) return refuse(platformOnly, `The '${platformOnly}' field is set by the platform for a model deployment's replicas only.`);
  const env = params.env ?? {};
  const envProblem = jobEnvProblem(env);
  if (envProblem) return refuse("env", envProblem);
  const gpuType = requestedGpuType(params.gpuType);
  // An empty or just-restarted view does not know every card yet: the job waits for one. Read only
  // for a job that names a type or several cards (the view's names are a walk over every card).
  const known = () => facts.cardNames.length > 0 && !facts.warmingUp;
  if (gpuType && known() && !matchingNames(facts.cardNames, gpuType).length)
    return refuse("gpuType", `No GPU in the cluster matches "${gpuType}". Known types: ${facts.cardNames.join(", ")}`, { knownTypes: facts.cardNames });
  const gpuCount = params.gpuCount ?? 1;
  if (gpuCount > 1) {
    const problem = gpuCountProblem(gpuCount, gpuType, known() ? facts.mostCardsOnOneNode(gpuType) : gpuCount, facts.runningGpus);
    if (problem) return refuse("gpuCount", problem);
  }
  const group = groupProblem(params);
  if (group) return refuse(group.field, group.message);
  // Pulling makes a GPU host connect to the image's registry: only the operator's registries (the node checks again).
  const image = containerImage ? checkImage(containerImage, facts.allowedRegistries) : null;
  if (image && !image.ok) return refuse("containerImage", `The 'containerImage' field is not allowed: ${image.reason}.`);
  // The stored document (lib/job-spec.ts): defaults resolved, nulls dropped; env is kept apart (its values are secrets).
  const job: NewJob = { id: ids.id, clientId: ids.clientId, spec: storedJob(params, facts.defaultTimeoutS), env: env as Record<string, string> };
  return { ok: true, job };
}

/** An array's parallelism beyond its size, or a dependency that names neither or both of a job and an array. */
function groupProblem(params: CreateJobParams): { field: string; message: string } | null {
  const { arrayCount, arrayParallelism } = params;
  if (arrayParallelism != null && arrayCount == null)
    return { field: "arrayParallelism", message: "The 'arrayParallelism' field needs 'arrayCount' (it caps how many jobs of an array run at once)." };
  if (arrayParallelism != null && arrayCount != null && arrayParallelism > arrayCount)
    return { field: "arrayParallelism", message: `The 'arrayParallelism' field (${arrayParallelism}) must not exceed 'arrayCount' (${arrayCount}).` };
  const deps = params.dependsOn ?? [];
  for (const [i, dep] of deps.entries())
    if ((dep.jobId === undefined) === (dep.arrayId === undefined))
      return { field: `dependsOn[${i}]`, message: "Each dependency names exactly one of 'jobId' and 'arrayId'." };
  return null;
}

/** A count no node can hold (`most`), or more than the account may ever hold at once, would wait forever. */
function gpuCountProblem(gpuCount: number, gpuType: string | null, most: number, runningGpus: number | null): string | null {
  if (gpuCount > most) {
    const matching = gpuType ? ` matching "${gpuType}"` : "";
    return `No GPU node has ${gpuCount} GPUs${matching} of one type; the most on one node is ${most}.`;
  }
  if (runningGpus !== null && gpuCount > runningGpus) return `The 'gpuCount' field (${gpuCount}) exceeds this account's limit of ${runningGpus} running GPUs.`;
  return null;
}
