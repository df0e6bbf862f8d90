/**
 * A job's platform access on its node (issue 28): the grant of its run call (lib/job-spec.ts
 * PlatformGrant) becomes the job's CI_PLATFORM_URL, CI_PLATFORM_TOKEN and CI_DATABASE_URL_<n>,
 * all pointing at the job's own loopback, and a relay (relay.ts) that carries those ports to the
 * node's two fixed destinations. The grant goes into the job's environment only: never into a
 * log, an error, a label or a command line.
 */
import { readFileSync } from "fs";
import path from "path";
import type { PlatformGrantParams } from "../../lib/job-spec";
import { JobError } from "./job";
import { JobRelay, RelayDestinations } from "./relay";
import { forwardRoutes, ForwardRoute, RELAY_HTTP_PORT, RELAY_PG_PORT } from "./relay-forwarder";
import type { RelaySettings } from "./settings";

/** The node's relay: where its destinations are and where job folders go; fixed at start. */
export type RelayHost = { destinations: RelayDestinations; dir: string };

/** The destinations of the node's settings (reads the CA file once, at start). */
export function relayHost(settings: RelaySettings): RelayHost {
  const destinations: RelayDestinations = {};
  if (settings.platformUrl) {
    const url = new URL(settings.platformUrl);
    const tls = url.protocol === "https:";
    destinations.platform = {
      host: url.hostname.replace(/^\[|\]$/g, ""),
      port: Number(url.port) || (tls ? 443 : 80),
      tls,
      path: url.pathname.replace(/\/$/, ""),
    };
  }
  if (settings.databaseHost) {
    const ca = settings.databaseCaFile ? readFileSync(settings.databaseCaFile) : undefined;
    destinations.database = { host: settings.databaseHost, port: settings.databasePort, sslMode: settings.databaseSslMode, ca };
  }
  return { destinations, dir: settings.dir };
}

/** Why this node cannot give `grant` what it asks for (a readable reason, never a value of the grant); null when it can. */
export function grantProblem(grant: PlatformGrantParams, host: RelayHost | undefined): string | null {
  if (!host?.destinations.platform)
    return "This GPU node has no relay to the platform (GPU_RELAY_PLATFORM_URL is not set): it cannot run jobs with platform access";
  if (grant.databases.length && !host.destinations.database)
    return "This GPU node has no relay to the database server (GPU_RELAY_DATABASE_HOST is not set): it cannot run jobs with database access";
  return null;
}

/** The job's variables: every address is its own loopback (the forwarder's ports). */
export function platformEnv(grant: PlatformGrantParams, platformPath = ""): Record<string, string> {
  const env: Record<string, string> = { CI_PLATFORM_URL: `http://127.0.0.1:${RELAY_HTTP_PORT}${platformPath}`, CI_PLATFORM_TOKEN: grant.token };
  grant.databases.forEach(({ database, user, password }, n) => {
    const credentials = `${encodeURIComponent(user)}:${encodeURIComponent(password)}`;
    // disable: this leg never leaves the host; the relay speaks TLS to the server (relay.ts).
    env[`CI_DATABASE_URL_${n}`] = `postgresql://${credentials}@127.0.0.1:${RELAY_PG_PORT}/${encodeURIComponent(database)}?sslmode=disable`;
  });
  return env;
}

/** One job's access while it runs: its relay, variables and forwarder routes. */
export type PlatformAccess = { relay: JobRelay; env: Record<string, string>; routes: ForwardRoute[] };

/** The job's relay folder: named after the job, so a restarted node finds it again (reopenRelay). */
const relayDir = (host: RelayHost, jobId: string) => path.join(host.dir, jobId);

/**
 * The relay of a job this node left running (a Docker job adopted after a restart), listening
 * again in the folder its container has bound; undefined where this node has no such relay now.
 */
export async function reopenRelay(jobId: string, withDatabase: boolean, host: RelayHost | undefined, owner?: { uid: number; gid: number }) {
  const { platform, database } = host?.destinations ?? {};
  if (!platform || (withDatabase && !database)) return undefined;
  return JobRelay.open(relayDir(host!, jobId), { platform, ...(withDatabase && { database }) }, owner);
}

/** Opens the job's relay (its folder named after the job); throws JobError with a readable reason. */
export async function openPlatformAccess(
  jobId: string,
  grant: PlatformGrantParams,
  host: RelayHost | undefined,
  owner?: { uid: number; gid: number },
): Promise<PlatformAccess> {
  const problem = grantProblem(grant, host);
  if (problem) throw new JobError(problem);
  const withDatabase = grant.databases.length > 0;
  const destinations = { platform: host!.destinations.platform, ...(withDatabase && { database: host!.destinations.database }) };
  const relay = await JobRelay.open(relayDir(host!, jobId), destinations, owner).catch((err: Error) => {
    throw new JobError(`The job's relay to the platform could not be opened: ${err.message}`);
  });
  return { relay, env: platformEnv(grant, host!.destinations.platform!.path), routes: forwardRoutes(withDatabase) };
}
