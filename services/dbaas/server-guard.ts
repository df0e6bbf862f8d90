/**
 * Where client databases may live: never on a server that lets a wrong password in (trust auth),
 * and never on the platform's own state server unless the operator opts in (and even then only if
 * it checks passwords). dbaas checks this before it starts, and again before provisioning while
 * the tenant server could not be reached.
 */
import { isUnavailable } from "./faults";

/** What logging in as a throw-away role with a wrong password over TCP did. */
export type ProbeOutcome = { connected: true } | { connected: false; code: string; message: string };

export type GuardFacts = {
  probe: ProbeOutcome;
  tenantSystemId: string;
  stateSystemId: string;
  allowStateServer: boolean;
};

// Raised only after authentication succeeded: the wrong password was accepted, the session then
// failed for another reason (no CONNECT right, no such database, too many connections for role).
const AFTER_AUTHENTICATION = new Set(["42501", "3D000", "53300", "55000"]);

/** Pure: the reason to refuse the tenant server, or undefined when it may host client databases. */
export function refusalReason({ probe, tenantSystemId, stateSystemId, allowStateServer }: GuardFacts): string | undefined {
  if (probe.connected || AFTER_AUTHENTICATION.has(probe.code))
    return "it accepted a login with a wrong password (trust authentication in pg_hba.conf?): every tenant could log in as any other; use scram-sha-256 for TCP connections";
  // 28P01: wrong password refused; other 28xxx: the login is refused outright (reject, ident, cert).
  if (!probe.code.startsWith("28"))
    return `the wrong-password probe failed in an unexpected way (${probe.code}: ${probe.message}), so password checking is not proven`;
  if (tenantSystemId === stateSystemId && !allowStateServer)
    return "it is the platform's own state server (DATABASE_URL's cluster): client databases need a server of their own, or DBAAS_ALLOW_STATE_SERVER=true";
  return undefined;
}

/** The tenant server fails a check: dbaas must not run on it. */
export class TenantServerRefused extends Error {
  constructor(reason: string) {
    super(`dbaas refuses to start: the tenant server (DBAAS_ADMIN_URL) ${reason}`);
    this.name = "TenantServerRefused";
  }
}

export const MISSING_ADMIN_URL =
  "dbaas refuses to start: DBAAS_ADMIN_URL is not set. Client databases are never placed on the platform's state server by default; " +
  "point DBAAS_ADMIN_URL at a PostgreSQL server that checks passwords (scram-sha-256), e.g. the cluster .ci/setup.d/30-tenant-postgres.sh creates";

export type GuardIo = {
  probeWrongPassword(): Promise<ProbeOutcome>;
  tenantSystemId(): Promise<string>;
  stateSystemId(): Promise<string>;
};

/** The real checks: the tenant server's probe and identity, and the state server's identity. */
export function guardIo(
  tenant: { probeWrongPassword(): Promise<ProbeOutcome>; systemId(): Promise<string> },
  stateDb: { query<R extends { id: string }>(sql: string): Promise<{ rows: R[] }> },
): GuardIo {
  return {
    probeWrongPassword: () => tenant.probeWrongPassword(),
    tenantSystemId: () => tenant.systemId(),
    stateSystemId: async () => (await stateDb.query<{ id: string }>("SELECT system_identifier::text AS id FROM pg_control_system()")).rows[0].id,
  };
}

/**
 * Runs the checks: resolves true when the server may be used, false when it could not be reached
 * (checked again later), and throws TenantServerRefused when it must not be used.
 */
export async function verifyTenantServer(io: GuardIo, allowStateServer: boolean): Promise<boolean> {
  try {
    const [probe, tenantSystemId, stateSystemId] = await Promise.all([io.probeWrongPassword(), io.tenantSystemId(), io.stateSystemId()]);
    const reason = refusalReason({ probe, tenantSystemId, stateSystemId, allowStateServer });
    if (reason) throw new TenantServerRefused(reason);
    return true;
  } catch (err) {
    if (isUnavailable(err)) return false;
    throw err;
  }
}
