/**
 * Whether this node takes a job the scheduler places on it (the `run` action), decided over a
 * snapshot of the node: its refusal or shutdown, its cards and the jobs it runs. Pure: app.ts
 * reads the snapshot, asks, and acts on the answer (runs the job, answers a repeated call, or
 * throws the error, after stopping an earlier attempt when told to).
 */
import { apiError, validationFailed } from "../../lib/errors";
import { jobEnvProblem, type RunJobParams } from "../../lib/job-spec";
import type { NodeCard } from "./discovery";

/** What the node knows when a `run` call arrives. */
export type NodeFacts = {
  /** Why this node runs no jobs (it cannot isolate them); unset when it can. */
  refusal?: string;
  /** false until the node has started, and again once it is stopping. */
  accepting: boolean;
  cards: readonly NodeCard[];
  /** The jobs it runs, by id: which attempt, on which cards (the first card first). */
  jobs: ReadonlyMap<string, { readonly attempt: number; readonly gpuUuids: readonly string[] }>;
};

/** Why a call is refused, as the error the caller gets: an API error code, or a field's problem. */
export type AdmissionError =
  { code: "SERVICE_UNAVAILABLE" | "NOT_FOUND" | "INVALID_STATE"; message: string } | { code: "VALIDATION_FAILED"; field: "env" | "gpuUuids"; message: string };

export type Admission =
  /** Run the job on these cards (all of them, the first being `gpuUuid`) as this attempt. */
  | { kind: "run"; cards: NodeCard[]; attempt: number }
  /** A repeated call for what already runs here: accepted, nothing to do. */
  | { kind: "already-running" }
  /** Refused; `stopEarlierAttempt`: first stop the job's earlier attempt still running here. */
  | { kind: "refused"; error: AdmissionError; stopEarlierAttempt?: true };

/** Every card of every job this node runs. */
export const busyCards = (jobs: Iterable<{ readonly gpuUuids: readonly string[] }>): Set<string> => new Set([...jobs].flatMap((j) => j.gpuUuids));

const refused = (error: AdmissionError): Extract<Admission, { kind: "refused" }> => ({ kind: "refused", error });

export function admitJob(node: NodeFacts, params: RunJobParams): Admission {
  const { jobId, gpuUuid, env } = params;
  const attempt = params.attempt ?? 1;
  if (node.refusal) return refused({ code: "SERVICE_UNAVAILABLE", message: node.refusal });
  const envProblem = env === undefined ? null : jobEnvProblem(env);
  if (envProblem) return refused({ code: "VALIDATION_FAILED", field: "env", message: envProblem });
  if (!node.accepting) return refused({ code: "SERVICE_UNAVAILABLE", message: "This GPU node is shutting down" });
  const uuids = params.gpuUuids ?? [gpuUuid];
  if (uuids[0] !== gpuUuid || new Set(uuids).size !== uuids.length)
    return refused({ code: "VALIDATION_FAILED", field: "gpuUuids", message: "The 'gpuUuids' field must list distinct cards, the first being 'gpuUuid'." });
  const cards: NodeCard[] = [];
  for (const uuid of uuids) {
    const card = node.cards.find((c) => c.uuid === uuid);
    if (!card) return refused({ code: "NOT_FOUND", message: `GPU ${uuid} is not a card of this node` });
    cards.push(card);
  }
  const existing = node.jobs.get(jobId);
  // An earlier attempt the scheduler gave up on (its node was lost, then came back): stop it, the retry comes again.
  if (existing && existing.attempt < attempt)
    return { ...refused({ code: "INVALID_STATE", message: `An earlier attempt of job ${jobId} is still stopping on this node` }), stopEarlierAttempt: true };
  if (existing?.gpuUuids.join() === uuids.join() && existing.attempt === attempt) return { kind: "already-running" };
  if (existing) return refused({ code: "INVALID_STATE", message: `Job ${jobId} already runs on other cards of this node` });
  const busy = busyCards(node.jobs.values());
  const taken = uuids.find((uuid) => busy.has(uuid));
  if (taken) return refused({ code: "INVALID_STATE", message: `GPU ${taken} is busy with another job` });
  return { kind: "run", cards, attempt };
}

/** The error a refused call throws. */
export function admissionError(error: AdmissionError): Error {
  return error.code === "VALIDATION_FAILED" ? validationFailed([{ field: error.field, message: error.message }]) : apiError(error.code, error.message);
}
