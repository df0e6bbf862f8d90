/** All SQL of model deployments (inference.deployments and inference.deployment_replicas, migration 3). */
import type { Pool } from "pg";
import { DEPLOYMENT_PROVIDER, type DeploymentRequestView, type DeploymentSpec, type DeploymentStatus } from "./contract";

export type DeploymentRow = {
  id: string;
  client_id: string;
  name: string;
  spec: DeploymentSpec;
  env: Record<string, string>;
  status: DeploymentStatus;
  status_reason: string | null;
  failures: number;
  desired: number;
  wanted_at: Date | null;
  last_request_at: Date | null;
  created_at: Date;
};

export type ReplicaRow = {
  job_id: string;
  deployment_id: string;
  node_id: string | null;
  model_id: string | null;
  ready_at: Date | null;
  /** Its stop was asked for (scale-down, or deletion): no new request goes to it. */
  stopping_at: Date | null;
  ended_at: Date | null;
  created_at: Date;
};

/** What the controller writes back after a decision. */
export type DeploymentState = { status: DeploymentStatus; statusReason: string | null; failures: number; desired: number; clearWanted: boolean };

const COLUMNS = "id, client_id, name, spec, env, status, status_reason, failures, desired, wanted_at, last_request_at, created_at";
const UNIQUE_VIOLATION = "23505";

export class DeploymentsRepository {
  constructor(private readonly db: Pool) {}

  /** False when the account already has a deployment of that name. */
  async insert(row: Pick<DeploymentRow, "id" | "client_id" | "name" | "spec" | "env">): Promise<DeploymentRow | undefined> {
    try {
      const { rows } = await this.db.query<DeploymentRow>(
        `INSERT INTO inference.deployments (id, client_id, name, spec, env, status, desired) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
        // Starting at once when it keeps replicas: "idle" is a deployment that needs none.
        [
          row.id,
          row.client_id,
          row.name,
          JSON.stringify(row.spec),
          JSON.stringify(row.env),
          row.spec.minReplicas > 0 ? "starting" : "idle",
          row.spec.minReplicas,
        ],
      );
      return rows[0];
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) return undefined;
      throw err;
    }
  }

  /** The latest requests for the deployment `d` (by its owner, to its name, since it was made), newest first. */
  async recentRequests(d: Pick<DeploymentRow, "client_id" | "name" | "created_at">, limit: number): Promise<DeploymentRequestView[]> {
    const { rows } = await this.db.query<DeploymentRequestView>(
      `SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt", outcome, error_code AS "errorCode",
              prompt_tokens AS "promptTokens", completion_tokens AS "completionTokens", duration_ms AS "durationMs", stream
         FROM inference.inferences
        WHERE client_id = $1 AND model = $2 AND provider = $3 AND created_at >= $4
        ORDER BY created_at DESC LIMIT $5`,
      [d.client_id, d.name, DEPLOYMENT_PROVIDER, d.created_at, limit],
    );
    return rows;
  }

  async listForClient(clientId: string): Promise<DeploymentRow[]> {
    const { rows } = await this.db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM inference.deployments WHERE client_id = $1 ORDER BY created_at DESC`, [
      clientId,
    ]);
    return rows;
  }

  async findForClient(id: string, clientId: string): Promise<DeploymentRow | undefined> {
    const { rows } = await this.db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM inference.deployments WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return rows[0];
  }

  async findByName(clientId: string, name: string): Promise<DeploymentRow | undefined> {
    const { rows } = await this.db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM inference.deployments WHERE client_id = $1 AND name = $2`, [clientId, name]);
    return rows[0];
  }

  /** Every deployment: the controller's round (a handful per account). */
  async all(): Promise<DeploymentRow[]> {
    const { rows } = await this.db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM inference.deployments ORDER BY created_at`);
    return rows;
  }

  /** New settings; a failed deployment tries again (failures reset). */
  async update(id: string, spec: DeploymentSpec, env: Record<string, string>): Promise<DeploymentRow | undefined> {
    const { rows } = await this.db.query<DeploymentRow>(
      `UPDATE inference.deployments SET spec = $2, env = $3, failures = 0,
         status = CASE WHEN status = 'failed' THEN 'idle' ELSE status END,
         status_reason = CASE WHEN status = 'failed' THEN NULL ELSE status_reason END
       WHERE id = $1 RETURNING ${COLUMNS}`,
      [id, JSON.stringify(spec), JSON.stringify(env)],
    );
    return rows[0];
  }

  async delete(id: string, clientId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(`DELETE FROM inference.deployments WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return (rowCount ?? 0) > 0;
  }

  /** A request for the deployment: traffic now; `waiting`: it waits for a replica (a failed deployment tries again). */
  async touch(id: string, waiting: boolean): Promise<void> {
    await this.db.query(
      waiting
        ? `UPDATE inference.deployments SET last_request_at = now(), wanted_at = COALESCE(wanted_at, now()),
             failures = CASE WHEN status = 'failed' THEN 0 ELSE failures END,
             status = CASE WHEN status = 'failed' THEN 'starting' ELSE status END
           WHERE id = $1`
        : `UPDATE inference.deployments SET last_request_at = now() WHERE id = $1`,
      [id],
    );
  }

  async saveState(id: string, s: DeploymentState): Promise<void> {
    await this.db.query(
      `UPDATE inference.deployments SET status = $2, status_reason = $3, failures = $4, desired = $5,
         wanted_at = CASE WHEN $6 THEN NULL ELSE wanted_at END WHERE id = $1`,
      [id, s.status, s.statusReason, s.failures, s.desired, s.clearWanted],
    );
  }

  /** The replicas not known to have ended, of the given deployments (all of them when absent). */
  async liveReplicas(deploymentIds?: string[]): Promise<ReplicaRow[]> {
    const { rows } = await this.db.query<ReplicaRow>(
      `SELECT job_id, deployment_id, node_id, model_id, ready_at, stopping_at, ended_at, created_at FROM inference.deployment_replicas
       WHERE ended_at IS NULL ${deploymentIds ? "AND deployment_id = ANY($1::uuid[])" : ""} ORDER BY created_at`,
      deploymentIds ? [deploymentIds] : [],
    );
    return rows;
  }

  async addReplica(jobId: string, deploymentId: string): Promise<void> {
    await this.db.query(`INSERT INTO inference.deployment_replicas (job_id, deployment_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [jobId, deploymentId]);
  }

  async replicaReady(jobId: string, nodeId: string, modelId: string): Promise<void> {
    await this.db.query(`UPDATE inference.deployment_replicas SET node_id = $2, model_id = $3, ready_at = now() WHERE job_id = $1`, [jobId, nodeId, modelId]);
  }

  /** Marks replicas whose stop is about to be asked for (the first time only). */
  async replicasStopping(jobIds: string[]): Promise<void> {
    await this.db.query(`UPDATE inference.deployment_replicas SET stopping_at = now() WHERE job_id = ANY($1::uuid[]) AND stopping_at IS NULL`, [jobIds]);
  }

  async replicaEnded(jobId: string): Promise<void> {
    await this.db.query(`UPDATE inference.deployment_replicas SET ended_at = now() WHERE job_id = $1 AND ended_at IS NULL`, [jobId]);
  }
}
