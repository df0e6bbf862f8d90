/**
 * gpu-scheduler's internal actions for model deployments (issue 29): the inference service runs a
 * deployment's replicas as ordinary GPU jobs of its owner (fair share, limits, quotas, metering
 * all apply), submitted, listed and stopped here on the owner's behalf. Called by inference only
 * (`callers`: its bus credential); never routed.
 */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { Context, ServiceSchema } from "moleculer";
import { DEPLOYMENT_ID_SYNTAX, type JobRequest, JobSpec } from "../../../lib/job-spec";
import type { ReplicaJob, ReplicaSubmitParams } from "../../../lib/deployment-protocol";
import type { SchedulerService } from "../app";
import type { CreatedJob } from "../contract";
import { submitJob } from "./job-submit";

/** A deployment's replicas newest first: enough for its live ones and the last ended ones. */
const REPLICAS_LISTED = 20;
/** What of an ended replica's output its deployment's statusReason quotes. */
const OUTPUT_TAIL_CHARS = 500;

const compiledJob = TypeCompiler.Compile(JobSpec);
const checkJob = (job: unknown): job is JobRequest => compiledJob.Check(job);

const internal = { visibility: "public", callers: ["inference"] } as const;
const CLIENT_ID = { type: "uuid" } as const;
const DEPLOYMENT_ID = { type: "string", pattern: DEPLOYMENT_ID_SYNTAX } as const;

export const ReplicaActionsMixin: Partial<ServiceSchema> = {
  actions: {
    /** A replica of a deployment, queued as a job of `clientId` (the deployment's owner). */
    submitReplica: {
      ...internal,
      params: { clientId: CLIENT_ID, job: { type: "object" } },
      async handler(this: SchedulerService, ctx: Context<ReplicaSubmitParams>): Promise<CreatedJob> {
        const { job, clientId } = ctx.params;
        if (!checkJob(job) || typeof job.deploymentId !== "string") throw new Error("A replica's job must be a valid job with its deploymentId");
        const created = await submitJob(this.app, { params: job, meta: {} }, clientId);
        if ("arrayId" in created) throw new Error("A replica is one job, never an array");
        return created;
      },
    },

    /** The deployment's replicas (newest first), with the node each runs on. */
    replicas: {
      ...internal,
      params: { clientId: CLIENT_ID, deploymentId: DEPLOYMENT_ID },
      async handler(this: SchedulerService, ctx: Context<{ clientId: string; deploymentId: string }>): Promise<{ replicas: ReplicaJob[] }> {
        const rows = await this.app.repo.listForClient(ctx.params.clientId, REPLICAS_LISTED, ctx.params.deploymentId);
        const details = await this.app.reader.details(rows);
        const replicas = rows.map((row, i): ReplicaJob => {
          const detail = details[i];
          return {
            id: row.id,
            status: detail.status,
            nodeId: row.node_id,
            exitCode: row.exit_code,
            errorMessage: detail.errorMessage ?? null,
            outputTail: (row.output ?? "").slice(-OUTPUT_TAIL_CHARS),
          };
        });
        return { replicas };
      },
    },

    /** Stops a replica (its owner's job); false when it had already ended. */
    stopReplica: {
      ...internal,
      params: { clientId: CLIENT_ID, jobId: { type: "uuid" } },
      async handler(this: SchedulerService, ctx: Context<{ clientId: string; jobId: string }>): Promise<{ stopped: boolean }> {
        const row = await this.app.reader.own({ id: ctx.params.jobId }, ctx.params.clientId);
        return { stopped: await this.app.scheduler.cancel(row) };
      },
    },
  },
};
