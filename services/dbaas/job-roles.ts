/**
 * GPU jobs' database roles (issue 28): the internal actions the scheduler calls when a job with
 * `platformAccess.databases` starts an attempt and when it ends. Each role is a login of its own,
 * a member of the database's tenant role (job-role-sql.ts), recorded in dbaas.job_roles before it
 * is created and forgotten once dropped, so revoking after a crash still finds it. `checkJobDatabases`
 * answers the scheduler's check at submission: every database the account's own, else 404.
 */
import type { Context, ServiceActionsSchema } from "moleculer";
import { notFound } from "../../lib/errors";
import { isUuid } from "../../lib/uuid";
import type { DbaasApp, WithApp } from "./app";
import { generatePassword, scramVerifier } from "./credentials";
import { unavailable } from "./faults";
import { createJobRoleSql } from "./job-role-sql";
import { findReady } from "./lookups";
import { generateJobRoleName } from "./naming";

/** What a job's node turns into CI_DATABASE_URL_<n> (PlatformGrant of lib/job-spec.ts). */
export type JobRoleGrant = { database: string; user: string; password: string };

/** Seconds a job role's password stays valid when the caller names no lifetime; revocation normally comes first. */
const DEFAULT_VALID_S = 3600 + 300;

export type GrantJobRoleParams = { clientId: string; jobId: string; databaseId: string; validForSeconds?: number };

/** A new login role for the job on the account's ready database; its password is in this answer only. */
export async function grantJobRole(app: DbaasApp, params: GrantJobRoleParams): Promise<JobRoleGrant> {
  const row = await findReady(app, params.databaseId, params.clientId);
  if (!(await app.verifyServer())) throw unavailable();
  const role = generateJobRoleName();
  const password = generatePassword();
  const tenant = { databaseName: row.database_name, username: row.username };
  await app.jobRoles.record(role, {
    jobId: params.jobId,
    clientId: params.clientId,
    databaseId: row.id,
    databaseName: row.database_name,
    ownerName: row.username,
  });
  const validUntil = new Date(Date.now() + (params.validForSeconds ?? DEFAULT_VALID_S) * 1000);
  await app.tenant.createJobRole(createJobRoleSql(role, tenant, { verifier: await scramVerifier(password), validUntil, tempFileLimitMb: row.max_storage_mb }));
  return { database: row.database_name, user: role, password };
}

/** Every role of the job gone, its sessions ended; idempotent. Returns how many were dropped. */
export async function revokeJobRoles(app: DbaasApp, jobId: string): Promise<{ revoked: number }> {
  const rows = await app.jobRoles.ofJob(jobId);
  for (const row of rows) {
    await app.tenant.dropJobRole(row.role_name, { databaseName: row.database_name, username: row.owner_name });
    await app.jobRoles.forget(row.role_name);
  }
  return { revoked: rows.length };
}

/** Throws 404 unless every id is an active database of the account. */
export async function checkJobDatabases(app: DbaasApp, clientId: string, databaseIds: string[]): Promise<{ ok: true }> {
  for (const id of databaseIds) {
    if (!isUuid(id) || !(await app.repo.findActive(id, clientId))) throw notFound("Database");
  }
  return { ok: true };
}

const jobId = { type: "string", min: 1, max: 128 };

export const jobRoleActions: ServiceActionsSchema = {
  /** Internal: a login role for one attempt of a GPU job (the scheduler, at dispatch). */
  grantJobRole: {
    visibility: "public",
    callers: ["gpu-scheduler"],
    params: { clientId: "string", jobId, databaseId: "string", validForSeconds: { type: "number", integer: true, positive: true, optional: true } },
    handler(this: WithApp, ctx: Context<GrantJobRoleParams>): Promise<JobRoleGrant> {
      return grantJobRole(this.app, ctx.params);
    },
  },

  /** Internal: the job's roles dropped and their sessions ended (the scheduler, when an attempt ends). */
  revokeJobRoles: {
    visibility: "public",
    callers: ["gpu-scheduler"],
    params: { jobId },
    handler(this: WithApp, ctx: Context<{ jobId: string }>): Promise<{ revoked: number }> {
      return revokeJobRoles(this.app, ctx.params.jobId);
    },
  },

  /** Internal: the scheduler's check of `platformAccess.databases` at submission (404 for any not the account's). */
  checkJobDatabases: {
    visibility: "public",
    callers: ["gpu-scheduler"],
    params: { clientId: "string", databaseIds: { type: "array", items: "string", max: 16 } },
    handler(this: WithApp, ctx: Context<{ clientId: string; databaseIds: string[] }>): Promise<{ ok: true }> {
      return checkJobDatabases(this.app, ctx.params.clientId, ctx.params.databaseIds);
    },
  },
};
