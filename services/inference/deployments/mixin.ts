/**
 * Model deployments in the inference service (issue 29), as a mixin whose hooks run after DbMixin's
 * (its pool and tables are there): the /api/deployments actions, the controller's life, and the model
 * lists with the caller's deployments. The engine routes a deployment's name through `router`.
 */
import type { Service, ServiceSchema } from "moleculer";
import { brokerEnv } from "../../../lib/settings";
import type { DbThis } from "../../../mixins/db.mixin";
import type { PublicModel } from "../contract";
import type { InferenceEngine } from "../engine";
import { parseInferenceSettings } from "../settings";
import { deploymentActions } from "./actions";
import { createDeployments, type DeploymentsSetup } from "./setup";

export type WithDeploymentsThis = Service & DbThis & { deployments: DeploymentsSetup; engine: InferenceEngine };

/** The providers' models, and the caller's deployments (provider `deployment`). */
export async function allModels(service: WithDeploymentsThis, clientId: string | undefined): Promise<PublicModel[]> {
  const [models, deployed] = await Promise.all([service.engine.listModels(), service.deployments.router.models(clientId)]);
  return [...models, ...deployed];
}

const mixin: Partial<ServiceSchema<Record<string, never>, WithDeploymentsThis>> = {
  actions: deploymentActions,

  created(this: WithDeploymentsThis) {
    const config = parseInferenceSettings(brokerEnv(this.broker));
    this.deployments = createDeployments({
      broker: this.broker,
      db: this.db,
      tickMs: config.deploymentsTickMs,
      requestTimeoutMs: config.timeoutMs,
      providerModels: () => this.engine.listModels(),
      warn: (m) => this.logger.warn(m),
    });
  },

  started(this: WithDeploymentsThis) {
    this.deployments.controller.start();
  },

  async stopped(this: WithDeploymentsThis) {
    await this.deployments.controller.stop();
    this.deployments.links.clear();
  },
};

// moleculer types `mixins` with the plain Service as `this` (as DbMixin).
export const DeploymentsMixin = mixin as Partial<ServiceSchema>;
