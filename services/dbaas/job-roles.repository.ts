/**
 * dbaas.job_roles: the login roles made for GPU jobs (job-roles.ts), one row each, written before
 * the role is created and deleted once it is dropped. Never the password.
 */
import type { Pool } from "pg";

export type JobRoleRow = { role_name: string; database_name: string; owner_name: string };

export class JobRolesRepository {
  constructor(private readonly db: Pool) {}

  async record(role: string, row: { jobId: string; clientId: string; databaseId: string; databaseName: string; ownerName: string }): Promise<void> {
    await this.db.query("INSERT INTO dbaas.job_roles (role_name, job_id, client_id, database_id, database_name, owner_name) VALUES ($1, $2, $3, $4, $5, $6)", [
      role,
      row.jobId,
      row.clientId,
      row.databaseId,
      row.databaseName,
      row.ownerName,
    ]);
  }

  async ofJob(jobId: string): Promise<JobRoleRow[]> {
    const { rows } = await this.db.query<JobRoleRow>("SELECT role_name, database_name, owner_name FROM dbaas.job_roles WHERE job_id = $1", [jobId]);
    return rows;
  }

  async forget(role: string): Promise<void> {
    await this.db.query("DELETE FROM dbaas.job_roles WHERE role_name = $1", [role]);
  }
}
