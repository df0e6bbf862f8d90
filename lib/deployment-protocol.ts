/**
 * What the inference service and gpu-scheduler / gpu-node say to each other about model
 * deployments (issue 29): a deployment's replicas are jobs of its owner (gpu-scheduler's
 * `submitReplica`, `replicas`, `stopReplica`), and the platform's HTTP requests reach a replica
 * through the gpu-node that runs it (`gpu-node.serve`: a byte tunnel to the replica's port).
 */
import type { JobRequest } from "./job-spec";

/** gpu-scheduler.submitReplica: the job (with `deploymentId` and `servePort`) queued for `clientId`. */
export type ReplicaSubmitParams = { clientId: string; job: JobRequest };

/** One replica as gpu-scheduler.replicas lists it: the job's public status and the node it runs on (real id). */
export type ReplicaJob = {
  id: string;
  status: string;
  nodeId: string | null;
  exitCode: number | null;
  errorMessage: string | null;
  /** The end of what it printed (its output is stored once it ended). */
  outputTail: string;
};

/** The action a replica's node answers: the request stream's bytes go to the replica's port, its answer's bytes come back. */
export const SERVE_ACTION = "gpu-node.serve";
/** gpu-node.serve's meta: which job's port. */
export type ServeMeta = { jobId: string };
