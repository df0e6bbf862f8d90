/**
 * The deployments' controller (issue 29): every tick (and when a request pokes it), for each
 * deployment, reads its replicas (gpu-scheduler's jobs of its owner), probes the running ones not
 * ready yet (GET readinessPath through their node), asks the pure decision (scaling.ts) and
 * carries it out: submits replicas as the owner's jobs, stops the ones not needed, writes the
 * status. One inference replica acts at a time (a PostgreSQL advisory lock per tick, as placement);
 * everything it knows is in the database, so any replica takes over after a restart.
 */
import type { Pool } from "pg";
import type { ReplicaJob } from "../../../lib/deployment-protocol";
import { MAX_JOB_SECONDS, type JobRequest } from "../../../lib/job-spec";
import type { DeploymentSpec } from "./contract";
import type { ReplicaLinks } from "./links";
import type { DeploymentRow, DeploymentsRepository, ReplicaRow } from "./repository";
import { decide, type ReplicaFacts } from "./scaling";
import { getFrom } from "./tunnel";

const LOCK_SQL = "SELECT pg_try_advisory_lock(hashtext('ci-platform:inference:deployments')) AS locked";
const UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtext('ci-platform:inference:deployments'))";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const PROBE_TIMEOUT_MS = 2000;
/**
 * How long a replica being stopped may finish the requests this process has in flight to it
 * before its job is stopped anyway (a scale-down drains; a long stream is cut after this).
 */
export const STOP_DRAIN_MS = 30_000;

/** What the controller asks of gpu-scheduler (lib/deployment-protocol.ts), as the deployment's owner. */
export type ReplicaJobs = {
  list(clientId: string, deploymentId: string): Promise<ReplicaJob[]>;
  submit(clientId: string, job: JobRequest): Promise<{ id: string }>;
  stop(clientId: string, jobId: string): Promise<void>;
};

export type ControllerDeps = {
  db: Pool;
  repo: DeploymentsRepository;
  jobs: ReplicaJobs;
  links: ReplicaLinks;
  tickMs: number;
  warn: (message: string) => void;
  /** A replica of the deployment was marked ready or ended (the router of this process reads them again). */
  replicasChanged?: (deploymentId: string) => void;
  now?: () => number;
};

/** The job of one replica: the deployment's command on its cards, serving on its port, as long as a job may run. */
export function replicaJob(d: Pick<DeploymentRow, "id" | "env"> & { spec: DeploymentSpec }): JobRequest {
  const { command, containerImage, gpuType, gpuCount, port } = d.spec;
  return {
    command,
    ...(containerImage && { containerImage }),
    ...(gpuType && { gpuType }),
    gpuCount,
    env: d.env,
    deploymentId: d.id,
    servePort: port,
    timeoutSeconds: MAX_JOB_SECONDS,
    maxRetries: 0,
  };
}

/** Why a replica ended, in words: its exit and the end of its output. */
export function endReason(job: ReplicaJob): string {
  const exit = job.exitCode !== null ? `exit code ${job.exitCode}` : job.status;
  const message = job.errorMessage ? ` (${job.errorMessage})` : "";
  const tail = job.outputTail.trim() ? `; output: ${job.outputTail.trim().slice(-300)}` : "";
  return `${exit}${message}${tail}`;
}

export class DeploymentController {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private readonly now: () => number;

  constructor(private readonly deps: ControllerDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => this.poke(), this.deps.tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** A round now (or right after the one under way). */
  poke(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.round()
      .catch((err: Error) => this.deps.warn(`Deployments' round failed: ${err.message}`))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
  }

  /** One round, if this replica holds the lock. */
  async round(): Promise<void> {
    const client = await this.deps.db.connect();
    try {
      const { rows } = await client.query<{ locked: boolean }>(LOCK_SQL);
      if (!rows[0].locked) return;
      try {
        const deployments = await this.deps.repo.all();
        await Promise.all(deployments.map((d) => this.reconcile(d).catch((err: Error) => this.deps.warn(`Deployment ${d.id}: ${err.message}`))));
      } finally {
        await client.query(UNLOCK_SQL);
      }
    } finally {
      client.release();
    }
  }

  private async reconcile(d: DeploymentRow): Promise<void> {
    const { repo, jobs, links } = this.deps;
    const tracked = await repo.liveReplicas([d.id]);
    // At rest (nothing running, wanted or kept): nothing to ask the scheduler.
    if (!tracked.length && d.wanted_at === null && d.spec.minReplicas === 0 && (d.status === "idle" || d.status === "failed")) return;
    const listed = await jobs.list(d.client_id, d.id);
    const byId = new Map(listed.map((j) => [j.id, j]));
    // A job submitted by a round that stopped before writing it down.
    for (const j of listed)
      if (!TERMINAL.has(j.status) && !tracked.some((t) => t.job_id === j.id)) {
        await repo.addReplica(j.id, d.id);
        tracked.push({
          job_id: j.id,
          deployment_id: d.id,
          node_id: null,
          model_id: null,
          ready_at: null,
          stopping_at: null,
          ended_at: null,
          created_at: new Date(),
        });
      }
    const facts = await Promise.all(tracked.map((t) => this.factsOf(d, t, byId.get(t.job_id))));
    // Those being stopped finish what they have and take nothing new: not part of the load.
    const inflight = tracked.reduce((n, t) => n + (t.stopping_at ? 0 : links.inflight(t.job_id)), 0);
    const plan = decide({
      spec: d.spec,
      status: d.status,
      statusReason: d.status_reason,
      failures: d.failures,
      wanted: d.wanted_at !== null,
      lastRequestAt: d.last_request_at?.getTime() ?? null,
      inflight,
      replicas: facts,
      now: this.now(),
    });
    for (const id of plan.ended) {
      await repo.replicaEnded(id);
      links.drop(id);
    }
    if (plan.ended.length || facts.some((f, i) => f.phase === "ready" && !tracked[i].ready_at)) this.deps.replicasChanged?.(d.id);
    // The state first: a reader never sees more replicas than the deployment says it wants.
    await repo.saveState(d.id, plan);
    for (let i = 0; i < plan.start; i++) {
      const { id } = await jobs.submit(d.client_id, replicaJob(d));
      await repo.addReplica(id, d.id);
    }
    // Out of routing first (every process within the router's 250 ms); its job is stopped once
    // this process has no request in flight to it, or after STOP_DRAIN_MS. One still stopping is
    // asked again each round until its job ends (a stop that failed is retried).
    if (plan.stop.length) {
      await repo.replicasStopping(plan.stop);
      this.deps.replicasChanged?.(d.id);
    }
    const toStop = tracked.filter((t, i) => plan.stop.includes(t.job_id) || facts[i].phase === "stopping");
    for (const t of toStop) {
      const drainedFor = this.now() - (t.stopping_at?.getTime() ?? this.now());
      if (links.inflight(t.job_id) === 0 || drainedFor >= STOP_DRAIN_MS) await jobs.stop(d.client_id, t.job_id);
    }
  }

  /** One tracked replica now: ended, ready (probed here when it runs and was not yet), or starting. */
  private async factsOf(d: DeploymentRow, t: ReplicaRow, job: ReplicaJob | undefined): Promise<ReplicaFacts> {
    const base = { jobId: t.job_id, everReady: t.ready_at !== null, createdAt: t.created_at.getTime() };
    if (job && TERMINAL.has(job.status)) return { ...base, phase: "ended", stopped: t.stopping_at !== null, endReason: endReason(job) };
    if (t.stopping_at) return { ...base, phase: "stopping" };
    if (t.ready_at) return { ...base, phase: "ready" };
    if (job?.status !== "running" || !job.nodeId) return { ...base, phase: "starting" };
    const modelId = await this.probe(d, t.job_id, job.nodeId);
    if (modelId === undefined) return { ...base, phase: "starting" };
    await this.deps.repo.replicaReady(t.job_id, job.nodeId, modelId);
    return { ...base, phase: "ready", everReady: true };
  }

  /** The replica's model id once its readiness path answers 2xx (its first /v1/models id, else the deployment's name); undefined: not ready. */
  private async probe(d: DeploymentRow, jobId: string, nodeId: string): Promise<string | undefined> {
    const { agent } = this.deps.links.get(jobId, nodeId);
    const ready = await getFrom(agent, d.spec.readinessPath, PROBE_TIMEOUT_MS).catch(() => undefined);
    if (!ready || ready.status < 200 || ready.status > 299) return undefined;
    const models = d.spec.readinessPath === "/v1/models" ? ready : await getFrom(agent, "/v1/models", PROBE_TIMEOUT_MS).catch(() => undefined);
    return firstModelId(models?.body) ?? d.name;
  }
}

/** The first `data[].id` of an OpenAI model list, if the text is one. */
export function firstModelId(body: string | undefined): string | undefined {
  try {
    const id = (JSON.parse(body ?? "") as { data?: Array<{ id?: unknown }> })?.data?.[0]?.id;
    return typeof id === "string" && id ? id : undefined;
  } catch {
    return undefined;
  }
}
