/**
 * The model deployments of one inference process, put together once (issue 29): repository,
 * links to replicas, router, controller, and the scheduler's replica actions as the owner.
 */
import type { ServiceBroker } from "moleculer";
import type { Pool } from "pg";
import type { ReplicaJob, ReplicaSubmitParams } from "../../../lib/deployment-protocol";
import type { PublicModel } from "../contract";
import type { DeploymentsApp } from "./actions";
import { DeploymentController, type ReplicaJobs } from "./controller";
import { ReplicaLinks } from "./links";
import { DeploymentsRepository } from "./repository";
import { DeploymentRouter } from "./router";
import { serveCall } from "./tunnel";

export type DeploymentsSetup = DeploymentsApp & { links: ReplicaLinks };

export function createDeployments(opts: {
  broker: ServiceBroker;
  db: Pool;
  tickMs: number;
  /** A call to a replica may last as long as an inference may. */
  requestTimeoutMs: number;
  providerModels: () => Promise<PublicModel[]>;
  warn: (message: string) => void;
}): DeploymentsSetup {
  const { broker } = opts;
  const repo = new DeploymentsRepository(opts.db);
  const links = new ReplicaLinks((nodeId, jobId) => serveCall(broker, nodeId, jobId, opts.requestTimeoutMs));
  const jobs: ReplicaJobs = {
    list: async (clientId, deploymentId) =>
      (await broker.call<{ replicas: ReplicaJob[] }, { clientId: string; deploymentId: string }>("gpu-scheduler.replicas", { clientId, deploymentId }))
        .replicas,
    submit: (clientId, job) => broker.call<{ id: string }, ReplicaSubmitParams>("gpu-scheduler.submitReplica", { clientId, job }),
    stop: async (clientId, jobId) => void (await broker.call("gpu-scheduler.stopReplica", { clientId, jobId })),
  };
  const controller = new DeploymentController({
    db: opts.db,
    repo,
    jobs,
    links,
    tickMs: opts.tickMs,
    warn: opts.warn,
    replicasChanged: (deploymentId) => router.replicasChanged(deploymentId),
  });
  const router = new DeploymentRouter({ repo, links, poke: () => controller.poke() });
  return { repo, links, jobs, controller, router, providerModels: opts.providerModels };
}
