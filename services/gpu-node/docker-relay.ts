/**
 * Platform access for a Docker job (issue 28), as a change to its create request: the job's relay
 * folder bound read-only at RELAY_MOUNT, and the relay's forwarder (relay-forwarder.ts) as the
 * container's entrypoint, run from read-only binds of the host's own node binary, its dynamic
 * loader and libraries — the job image needs nothing. The container keeps no network: the
 * forwarder listens on its loopback and reaches only the folder's sockets. Pure.
 */
import { promises as fs } from "fs";
import type Docker from "dockerode";
import type { JobOps } from "./job";
import type { PlatformAccess } from "./platform-access";
import type { JobRelay } from "./relay";
import { SERVE_MOUNT, type ServeSocket } from "./serve-relay";
import { forwarderArgv, forwarderEnv, hostNode, loaderOf, RELAY_MOUNT } from "./relay-forwarder";

/** `NAME=value` entries as a record (the first `=` splits). */
const variables = (entries: string[] = []): Record<string, string> =>
  Object.fromEntries(entries.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]));

/** Where the host's node binary and its libraries appear inside a job container (read-only). */
export const CONTAINER_NODE = "/run/ci-platform-node/node";
export const CONTAINER_LIBS = "/run/ci-platform-node/lib";

/** On a job container with a relay: `platform` or `platform+database` (what a restarted node reopens; never a value of the grant). */
export const LABEL_RELAY = "ci-platform.relay";
export const relayLabel = (access: PlatformAccess): string => (access.routes.length > 1 ? "platform+database" : "platform");

/** Who connects to the relay's sockets: the user every job container runs as (container-spec.ts). */
export const CONTAINER_USER = { uid: 65534, gid: 65534 };

/** On a model deployment's replica container (issue 29): its port; a restarted node removes its serve folder when it ends. */
export const LABEL_SERVE = "ci-platform.serve";

/** `request` with the job's relay: its variables, binds and the forwarder in front of the job's entrypoint. */
export function withRelay(request: Docker.ContainerCreateOptions, access: PlatformAccess, node = hostNode()): Docker.ContainerCreateOptions {
  return withForwarder(request, { access }, node);
}

/**
 * `request` with the forwarder in front of the job's entrypoint, for its platform access (the
 * relay folder read-only, its variables) and, for a deployment's replica, its serve folder
 * (writable: the forwarder makes the socket there, serve-relay.ts).
 */
export function withForwarder(
  request: Docker.ContainerCreateOptions,
  { access, serve }: { access?: PlatformAccess; serve?: ServeSocket },
  node = hostNode(),
): Docker.ContainerCreateOptions {
  const { loader, libs } = loaderOf();
  const inside = [`${CONTAINER_LIBS}/${loader.slice(libs.length + 1)}`, "--library-path", CONTAINER_LIBS, CONTAINER_NODE];
  const jobArgv = [...((request.Entrypoint as string[] | undefined) ?? []), ...((request.Cmd as string[] | undefined) ?? [])];
  const routes = [...(access?.routes ?? []), ...(serve ? [serve.route] : [])];
  const [entrypoint, ...cmd] = forwarderArgv(inside, routes, jobArgv);
  const binds = [`${node}:${CONTAINER_NODE}:ro`, `${libs}:${CONTAINER_LIBS}:ro`];
  if (access) binds.unshift(`${access.relay.dir}:${RELAY_MOUNT}:ro`);
  if (serve) binds.push(`${serve.dir}:${SERVE_MOUNT}`);
  const labels = { ...(access && { [LABEL_RELAY]: relayLabel(access) }), ...(serve && { [LABEL_SERVE]: String(serve.route.port) }) };
  return {
    ...request,
    Entrypoint: [entrypoint],
    Cmd: cmd,
    Env: Object.entries(forwarderEnv({ ...variables(request.Env), ...access?.env })).map(([name, value]) => `${name}=${value}`),
    Labels: { ...request.Labels, ...labels },
    HostConfig: { ...request.HostConfig, Binds: [...(request.HostConfig?.Binds ?? []), ...binds] },
  };
}

/** `ops` of an adopted replica, its serve folder (`dir`, absent: none) removed after its own cleanup. */
export function closingServe(ops: JobOps, dir: string | undefined): JobOps {
  if (!dir) return ops;
  return { ...ops, cleanup: () => ops.cleanup().finally(() => fs.rm(dir, { recursive: true, force: true })) };
}

/** `ops` of an adopted job, its relay (reopened) closed after its own cleanup. */
export function closingRelay(ops: JobOps, relay: JobRelay | undefined): JobOps {
  if (!relay) return ops;
  return { ...ops, cleanup: () => ops.cleanup().finally(() => relay.close()) };
}
