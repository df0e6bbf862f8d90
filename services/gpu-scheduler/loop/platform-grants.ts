/**
 * The credentials of a job with `platformAccess` (issue 28): made per attempt at dispatch (a
 * `cit_` token from auth, a login role per database from dbaas) and handed to the node in the run
 * call only, never stored; revoked once the attempt no longer runs. The durable record is
 * store/grants.repository.ts: housekeeping's `sweep` (every tick, on every replica) revokes what
 * ended, so a cancel, a time limit, a lost node, a retry or a scheduler restart all end them.
 */
import type { LoggerInstance, ServiceBroker } from "moleculer";
import type { PlatformAccessParams, PlatformGrantParams } from "../../../lib/job-spec";
import type { GrantRow, GrantsRepository } from "../store/grants.repository";

/** The token's lifetime beyond the job's time limit: revocation normally ends it long before. */
export const GRANT_MARGIN_S = 300;
/** Grants revoked per sweep (the rest on the next tick). */
const SWEEP_LIMIT = 50;

/** The internal actions of auth and dbaas a grant is made and revoked with (a fake in unit tests). */
export interface PlatformCalls {
  issueToken(p: {
    clientId: string;
    jobId: string;
    scopes: string[];
    models?: string[];
    databases?: string[];
    expiresInSeconds: number;
  }): Promise<{ token: string }>;
  revokeTokens(jobId: string): Promise<void>;
  grantRole(p: { clientId: string; jobId: string; databaseId: string; validForSeconds: number }): Promise<PlatformGrantParams["databases"][number]>;
  revokeRoles(jobId: string): Promise<void>;
}

export function brokerPlatformCalls(broker: ServiceBroker): PlatformCalls {
  return {
    issueToken: (p) => broker.call("auth.issueJobToken", p),
    revokeTokens: async (jobId) => void (await broker.call("auth.revokeJobTokens", { jobId })),
    grantRole: (p) => broker.call("dbaas.grantJobRole", p),
    revokeRoles: async (jobId) => void (await broker.call("dbaas.revokeJobRoles", { jobId })),
  };
}

/** A grant that could not be made; `permanent`: asking again will not help (a database gone, a refused scope). */
export class GrantFailed extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

/** A 4xx answer from auth or dbaas: the request itself is refused. */
const isRefusal = (err: unknown) => {
  const code = (err as { code?: unknown }).code;
  return typeof code === "number" && code >= 400 && code < 500 && (err as { name?: string }).name !== "ServiceNotFoundError";
};

export type GrantRequest = { clientId: string; jobId: string; attempt: number; access: PlatformAccessParams; timeoutSeconds: number };

export class PlatformGrants {
  constructor(
    private readonly repo: Pick<GrantsRepository, "begin" | "settle" | "claimEnded" | "release" | "remove">,
    private readonly calls: PlatformCalls,
    private readonly logger: LoggerInstance,
  ) {}

  /** The attempt's token and database roles; throws GrantFailed (what was made is revoked by the sweep once the attempt ends). */
  async grant(req: GrantRequest): Promise<PlatformGrantParams> {
    const { clientId, jobId, access } = req;
    const lifetimeS = req.timeoutSeconds + GRANT_MARGIN_S;
    try {
      const withDatabases = Boolean(access.databases?.length);
      await this.repo.begin(jobId, req.attempt, withDatabases, (earlier) =>
        this.revoke(
          jobId,
          earlier.some((g) => g.databases),
        ),
      );
    } catch (err) {
      throw new GrantFailed(`Platform credentials not ready: ${(err as Error).message}`, false);
    }
    try {
      const databaseIds = access.databases ?? [];
      const { token } = await this.calls.issueToken({
        clientId,
        jobId,
        scopes: access.scopes,
        ...(access.models && { models: access.models }),
        ...(access.databases && { databases: access.databases }),
        expiresInSeconds: lifetimeS,
      });
      const databases = [];
      for (const databaseId of databaseIds) databases.push(await this.calls.grantRole({ clientId, jobId, databaseId, validForSeconds: lifetimeS }));
      return { token, databases };
    } catch (err) {
      throw new GrantFailed(`Platform credentials could not be made: ${(err as Error).message}`, isRefusal(err));
    } finally {
      await this.repo.settle(jobId, req.attempt).catch((err) => this.logger.warn(`Grant of job ${jobId} not settled: ${(err as Error).message}`));
    }
  }

  /** Revokes the grants of attempts that ended; returns how many. A failed revocation is tried again on the next sweep. */
  async sweep(): Promise<number> {
    const ended = await this.repo.claimEnded(SWEEP_LIMIT);
    const done = await Promise.all(ended.map((grant) => this.revokeGrant(grant)));
    return done.filter(Boolean).length;
  }

  private async revokeGrant(grant: GrantRow): Promise<boolean> {
    try {
      await this.revoke(grant.job_id, grant.databases);
      await this.repo.remove(grant);
      return true;
    } catch (err) {
      this.logger.warn(`Credentials of job ${grant.job_id} (attempt ${grant.attempt}) not revoked yet: ${(err as Error).message}`);
      await this.repo.release(grant).catch(() => undefined); // the lease would run out anyway
      return false;
    }
  }

  /** By job (idempotent): the token, and the database roles (their sessions ended) when it had some. */
  private async revoke(jobId: string, databases: boolean): Promise<void> {
    await Promise.all([this.calls.revokeTokens(jobId), databases && this.calls.revokeRoles(jobId)]);
  }
}
