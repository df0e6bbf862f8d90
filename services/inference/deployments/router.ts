/**
 * Requests for a deployment's model (issue 29): whether a model name is one of the caller's
 * deployments, holding a request while a replica starts (cold start, up to the deployment's
 * coldStartTimeoutSeconds, then 503 with Retry-After), and the ready replica with the fewest
 * requests in flight for each attempt. Any inference replica routes; the controller
 * (controller.ts) starts what requests ask for.
 */
import { apiError } from "../../../lib/errors";
import type { ModelEntry } from "../catalogue";
import type { PublicModel } from "../contract";
import { describeModel, UNKNOWN_SIZE } from "../model-info";
import type { Provider } from "../providers";
import { DEPLOYMENT_PROVIDER } from "./contract";
import { FailoverProvider } from "./failover";
import type { ReplicaLinks } from "./links";
import type { DeploymentRow, DeploymentsRepository, ReplicaRow } from "./repository";

/** A caller's deployments are read again after this long (another replica may have made or removed one). */
const NAMES_TTL_MS = 2000;
/** Traffic is written down at most this often per deployment. */
const TOUCH_EVERY_MS = 1000;
/**
 * How long this process reuses a deployment's ready replicas: one read serves a request's prepare
 * and pick and the requests of the next moments. The controller's own process forgets them as soon
 * as it marks a replica ready or ended (replicasChanged); other inference processes see that within
 * this long.
 */
const READY_TTL_MS = 250;
/** How often a held request looks for a ready replica. */
const POLL_MS = 100;
/**
 * How long a replica a request could not reach is passed over: until the platform has heard of its
 * end (the controller then marks it ended), or, if it was a passing fault, not for long.
 */
const UNREACHABLE_MS = 5000;
/** The Retry-After of a cold start that timed out. */
const RETRY_AFTER_S = 10;

export type RouterDeps = {
  repo: Pick<DeploymentsRepository, "listForClient" | "liveReplicas" | "touch" | "findForClient">;
  links: ReplicaLinks;
  /** Wakes the controller now (a request waits, or replicas are overloaded). */
  poke: () => void;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
};

/** The replicas a request may go to: ready, and not being stopped. */
const readyOf = (rows: ReplicaRow[]) => rows.filter((r) => r.ready_at && r.node_id && r.model_id && !r.stopping_at);

export class DeploymentRouter {
  private readonly names = new Map<string, { at: number; byName: Map<string, DeploymentRow> }>();
  private readonly touched = new Map<string, number>();
  private readonly readyCache = new Map<string, { at: number; rows: Promise<ReplicaRow[]> }>();
  /** Replicas a request could not reach, by job id: until when they are passed over. */
  private readonly unreachableUntil = new Map<string, number>();
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly deps: RouterDeps) {
    this.now = deps.now ?? Date.now;
    this.sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** The caller's deployment named `model`, if it is one. */
  async owned(clientId: string, model: string): Promise<DeploymentRow | undefined> {
    let cached = this.names.get(clientId);
    if (!cached || this.now() - cached.at > NAMES_TTL_MS) {
      const rows = await this.deps.repo.listForClient(clientId);
      cached = { at: this.now(), byName: new Map(rows.map((r) => [r.name, r])) };
      this.names.set(clientId, cached);
    }
    return cached.byName.get(model);
  }

  /** The caller's deployments changed here: read them again next time. */
  forget(clientId: string): void {
    this.names.delete(clientId);
  }

  /** The controller marked a replica of `deploymentId` ready or ended: the next request reads them again. */
  replicasChanged(deploymentId: string): void {
    this.readyCache.delete(deploymentId);
  }

  /** The caller's deployments as models (provider `deployment`). */
  async models(clientId: string | undefined): Promise<PublicModel[]> {
    if (!clientId) return [];
    const rows = await this.deps.repo.listForClient(clientId);
    return rows.map((d) => ({ name: d.name, provider: DEPLOYMENT_PROVIDER, parameterSize: UNKNOWN_SIZE, description: describeDeployment() }));
  }

  /**
   * Before a request for a deployment goes on: resolves once a replica is ready (`coldStart`:
   * it had to wait for one); undefined for a model that is no deployment of the caller's.
   */
  async prepare(clientId: string, model: string): Promise<{ coldStart: boolean } | undefined> {
    const deployment = await this.owned(clientId, model);
    if (!deployment) return undefined;
    const ready = await this.ready(deployment.id);
    if (ready.length) {
      await this.traffic(deployment.id);
      const inflight = ready.reduce((n, r) => n + this.deps.links.inflight(r.job_id), 0);
      if (inflight >= deployment.spec.targetInflight * ready.length) this.deps.poke();
      return { coldStart: false };
    }
    await this.deps.repo.touch(deployment.id, true);
    this.deps.poke();
    const deadline = this.now() + deployment.spec.coldStartTimeoutSeconds * 1000;
    while (this.now() < deadline) {
      await this.sleep(POLL_MS);
      if ((await this.ready(deployment.id, true)).length) return { coldStart: true };
      const now = await this.deps.repo.findForClient(deployment.id, clientId);
      if (!now) throw apiError("MODEL_NOT_FOUND", `Model "${model}" not found`);
      if (now.status === "failed")
        throw apiError("SERVICE_UNAVAILABLE", `Deployment "${model}" failed: ${now.status_reason ?? "its replicas never became ready"}`, {
          retryAfter: RETRY_AFTER_S,
        });
    }
    throw apiError("SERVICE_UNAVAILABLE", `Deployment "${model}" has no ready replica after ${deployment.spec.coldStartTimeoutSeconds} s`, {
      retryAfter: RETRY_AFTER_S,
    });
  }

  /**
   * The ready replica with the fewest requests in flight, as a model entry and its provider;
   * undefined for no deployment. With none ready (a fallback's deployment), waits as prepare() does.
   */
  async pick(clientId: string, model: string): Promise<{ entry: ModelEntry; provider: Provider } | undefined> {
    const deployment = await this.owned(clientId, model);
    if (!deployment) return undefined;
    let ready = await this.ready(deployment.id);
    if (!ready.length) {
      // A fallback to a cold deployment (a direct request was held by prepare()): held as a direct request is.
      await this.prepare(clientId, model);
      ready = await this.ready(deployment.id, true);
    }
    if (!ready.length) throw apiError("SERVICE_UNAVAILABLE", `Deployment "${model}" has no ready replica`, { retryAfter: RETRY_AFTER_S });
    // Fewest in flight first (a stable sort: the first of equals as listed); the others take the request if it cannot reach its replica.
    const order = this.withoutUnreachable(ready)
      .map((replica) => ({ replica, link: this.deps.links.get(replica.job_id, replica.node_id!) }))
      .sort((a, b) => a.link.agent.inflight - b.link.agent.inflight);
    const entry: ModelEntry = {
      name: deployment.name,
      provider: DEPLOYMENT_PROVIDER,
      upstreamId: order[0].replica.model_id!,
      parameterSize: UNKNOWN_SIZE,
      description: describeDeployment(),
    };
    if (order.length === 1) return { entry, provider: order[0].link.provider };
    const candidates = order.map(({ replica, link }) => ({ jobId: replica.job_id, modelId: replica.model_id!, provider: link.provider }));
    return { entry, provider: new FailoverProvider(candidates, (jobId) => this.unreachable(deployment.id, jobId)) };
  }

  /** A replica a request could not reach: passed over for UNREACHABLE_MS, and the ready replicas read again. */
  private unreachable(deploymentId: string, jobId: string): void {
    this.unreachableUntil.set(jobId, this.now() + UNREACHABLE_MS);
    this.readyCache.delete(deploymentId);
  }

  /** `ready` less the replicas recently found unreachable (all of them when every one was). */
  private withoutUnreachable(ready: ReplicaRow[]): ReplicaRow[] {
    if (!this.unreachableUntil.size) return ready;
    const now = this.now();
    for (const [jobId, until] of this.unreachableUntil) if (until <= now) this.unreachableUntil.delete(jobId);
    const kept = ready.filter((r) => !this.unreachableUntil.has(r.job_id));
    return kept.length ? kept : ready;
  }

  /** The deployment's ready replicas: read at most every READY_TTL_MS in this process, unless `fresh` (a cold start waiting). */
  private ready(deploymentId: string, fresh = false): Promise<ReplicaRow[]> {
    const hit = this.readyCache.get(deploymentId);
    if (!fresh && hit && this.now() - hit.at < READY_TTL_MS) return hit.rows;
    const rows = this.deps.repo.liveReplicas([deploymentId]).then(readyOf);
    const entry = { at: this.now(), rows };
    this.readyCache.set(deploymentId, entry);
    // A failed read is not reused (a newer one, made meanwhile, stays).
    rows.catch(() => this.readyCache.get(deploymentId) === entry && this.readyCache.delete(deploymentId));
    return rows;
  }

  private async traffic(deploymentId: string): Promise<void> {
    const last = this.touched.get(deploymentId) ?? 0;
    if (this.now() - last < TOUCH_EVERY_MS) return;
    this.touched.set(deploymentId, this.now());
    await this.deps.repo.touch(deploymentId, false);
  }
}

const describeDeployment = () => describeModel({ provider: DEPLOYMENT_PROVIDER, parameterSize: UNKNOWN_SIZE });
