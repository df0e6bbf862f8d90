/**
 * The deployment routes (API-DECISIONS "Model deployments"): /api/deployments, a second REST
 * base of the inference service (lib/service-routes.ts). Each handler hands over to a function
 * below; the replicas are the controller's (controller.ts).
 */
import { randomUUID } from "crypto";
import type { Context, ServiceActionsSchema } from "moleculer";
import { apiError, type ErrorCode, notFound, validationFailed } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import { jobEnvProblem } from "../../../lib/job-spec";
import { respondCreated } from "../../../lib/http-meta";
import { type TSchema } from "@sinclair/typebox";
import { Type } from "../../../lib/contract";
import { isUuid } from "../../../lib/uuid";
import type { PublicModel } from "../contract";
import {
  Deployment,
  DeploymentCreate,
  type DeploymentCreateParams,
  DeploymentList,
  DeploymentPatch,
  type DeploymentPatchParams,
  DeploymentRequestList,
  type DeploymentRequestView,
  RECENT_REQUESTS,
  type DeploymentView,
  specOf,
} from "./contract";
import type { DeploymentController, ReplicaJobs } from "./controller";
import type { DeploymentRow, DeploymentsRepository } from "./repository";
import type { DeploymentRouter } from "./router";

export const DEPLOYMENTS_BASE = "/deployments";

/** What the routes use of the inference service. */
export type DeploymentsApp = {
  repo: DeploymentsRepository;
  router: DeploymentRouter;
  controller: DeploymentController;
  jobs: ReplicaJobs;
  /** The providers' models now (a deployment may not take one's name). */
  providerModels: () => Promise<PublicModel[]>;
};
type WithDeployments = { deployments: DeploymentsApp };
type Ctx<P> = Context<P, CallerMeta>;

export async function toView(app: DeploymentsApp, row: DeploymentRow): Promise<DeploymentView> {
  // One being stopped is neither starting nor ready (desired already leaves it out).
  const live = (await app.repo.liveReplicas([row.id])).filter((r) => r.stopping_at === null);
  const ready = live.filter((r) => r.ready_at !== null).length;
  return {
    id: row.id,
    name: row.name,
    model: row.name,
    status: row.status,
    statusReason: row.status_reason,
    replicas: { desired: row.desired, starting: live.length - ready, ready },
    ...row.spec,
    envNames: Object.keys(row.env).sort(),
    createdAt: row.created_at.toISOString(),
  };
}

function checkEnv(env: Record<string, string> | undefined): void {
  const problem = env === undefined ? null : jobEnvProblem(env);
  if (problem) throw validationFailed([{ field: "env", message: problem }]);
}

async function own(app: DeploymentsApp, id: string, clientId: string): Promise<DeploymentRow> {
  const row = isUuid(id) ? await app.repo.findForClient(id, clientId) : undefined;
  if (!row) throw notFound("Deployment");
  return row;
}

function checkReplicaRange(min: number, max: number): void {
  if (min > max) throw validationFailed([{ field: "minReplicas", message: `The 'minReplicas' field (${min}) must not exceed 'maxReplicas' (${max}).` }]);
}

export async function createDeployment(app: DeploymentsApp, ctx: Ctx<DeploymentCreateParams>): Promise<DeploymentView> {
  const clientId = ctx.meta.caller!.clientId;
  const { name, env } = ctx.params;
  checkEnv(env);
  const spec = specOf(ctx.params);
  checkReplicaRange(spec.minReplicas, spec.maxReplicas);
  if ((await app.providerModels()).some((m) => m.name === name)) throw apiError("NAME_TAKEN", `"${name}" is the name of a model of a provider`);
  const row = await app.repo.insert({ id: randomUUID(), client_id: clientId, name, spec, env: env ?? {} });
  if (!row) throw apiError("NAME_TAKEN", `The account already has a deployment named "${name}"`);
  app.router.forget(clientId);
  app.controller.poke();
  respondCreated(ctx.meta, `/api${DEPLOYMENTS_BASE}/${row.id}`);
  return toView(app, row);
}

export async function patchDeployment(app: DeploymentsApp, ctx: Ctx<DeploymentPatchParams>): Promise<DeploymentView> {
  const clientId = ctx.meta.caller!.clientId;
  const { id, env, ...scaling } = ctx.params;
  const row = await own(app, id, clientId);
  checkEnv(env);
  const spec = { ...row.spec, ...scaling };
  checkReplicaRange(spec.minReplicas, spec.maxReplicas);
  const updated = await app.repo.update(row.id, spec, env ?? row.env);
  if (!updated) throw notFound("Deployment");
  app.router.forget(clientId);
  app.controller.poke();
  return toView(app, updated);
}

export async function deleteDeployment(app: DeploymentsApp, id: string, clientId: string): Promise<{ message: string }> {
  const row = await own(app, id, clientId);
  const live = await app.repo.liveReplicas([row.id]);
  await app.repo.delete(row.id, clientId);
  app.router.forget(clientId);
  await Promise.all(live.map((r) => app.jobs.stop(clientId, r.job_id).catch(() => undefined)));
  return { message: `Deployment ${row.name} deleted; its replicas are stopping` };
}

const ID = { id: { type: "string" } };
const doc = (summary: string, status: number, response: TSchema, errors: ErrorCode[] = []) => ({ tag: "models" as const, summary, status, response, errors });

export const deploymentActions: ServiceActionsSchema = {
  createDeployment: {
    rest: { method: "POST", basePath: DEPLOYMENTS_BASE, path: "/" },
    auth: "required",
    scope: "jobs:write",
    openapi: doc("Deploy a model server on the platform's GPUs", 201, Deployment, ["NAME_TAKEN"]),
    params: DeploymentCreate,
    handler(this: WithDeployments, ctx: Ctx<DeploymentCreateParams>): Promise<DeploymentView> {
      return createDeployment(this.deployments, ctx);
    },
  },

  listDeployments: {
    rest: { method: "GET", basePath: DEPLOYMENTS_BASE, path: "/" },
    auth: "required",
    scope: "jobs:read",
    openapi: doc("The caller's deployments, newest first", 200, DeploymentList),
    params: { $$strict: "remove" },
    async handler(this: WithDeployments, ctx: Ctx<unknown>): Promise<{ deployments: DeploymentView[] }> {
      const rows = await this.deployments.repo.listForClient(ctx.meta.caller!.clientId);
      return { deployments: await Promise.all(rows.map((r) => toView(this.deployments, r))) };
    },
  },

  getDeployment: {
    rest: { method: "GET", basePath: DEPLOYMENTS_BASE, path: "/:id" },
    auth: "required",
    scope: "jobs:read",
    openapi: doc("One deployment", 200, Deployment, ["NOT_FOUND"]),
    params: { $$strict: "remove", ...ID },
    async handler(this: WithDeployments, ctx: Ctx<{ id: string }>): Promise<DeploymentView> {
      return toView(this.deployments, await own(this.deployments, ctx.params.id, ctx.meta.caller!.clientId));
    },
  },

  deploymentRequests: {
    rest: { method: "GET", basePath: DEPLOYMENTS_BASE, path: "/:id/requests" },
    auth: "required",
    scope: "jobs:read",
    openapi: doc(`A deployment's latest ${RECENT_REQUESTS} requests (outcome, tokens, duration), newest first`, 200, DeploymentRequestList, ["NOT_FOUND"]),
    params: { $$strict: "remove", ...ID },
    async handler(this: WithDeployments, ctx: Ctx<{ id: string }>): Promise<{ requests: DeploymentRequestView[] }> {
      const row = await own(this.deployments, ctx.params.id, ctx.meta.caller!.clientId);
      return { requests: await this.deployments.repo.recentRequests(row, RECENT_REQUESTS) };
    },
  },

  patchDeployment: {
    rest: { method: "PATCH", basePath: DEPLOYMENTS_BASE, path: "/:id" },
    auth: "required",
    scope: "jobs:write",
    openapi: doc("Change a deployment's scaling or environment (a failed one tries again)", 200, Deployment, ["NOT_FOUND"]),
    params: DeploymentPatch,
    handler(this: WithDeployments, ctx: Ctx<DeploymentPatchParams>): Promise<DeploymentView> {
      return patchDeployment(this.deployments, ctx);
    },
  },

  deleteDeployment: {
    rest: { method: "DELETE", basePath: DEPLOYMENTS_BASE, path: "/:id" },
    auth: "required",
    scope: "jobs:write",
    openapi: doc("Delete a deployment and stop its replicas", 200, Type.Object({ message: Type.String() }), ["NOT_FOUND"]),
    params: { $$strict: "remove", ...ID },
    handler(this: WithDeployments, ctx: Ctx<{ id: string }>): Promise<{ message: string }> {
      return deleteDeployment(this.deployments, ctx.params.id, ctx.meta.caller!.clientId);
    },
  },
};
