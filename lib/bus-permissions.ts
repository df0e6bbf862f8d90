/**
 * NATS subject permissions per bus user, generated from what the services' schemas declare
 * (pure; the composition root hands the tables in). The outer wall of "who may call what": a role
 * may publish a request only for the actions whose `callers` (lib/bus-identity.ts, declared on each
 * action) name it, an event only if its service `emits` it, a channel message only if its service
 * `publishes` on it, and only under its own sender tokens (lib/bus-subjects.ts), so no credential
 * can speak as another role or another gpu-node. The receiving service checks the callers again
 * (the Auth middleware).
 */
import type { ServiceSchema } from "moleculer";
import { CORE_ROLE, CallerTableRow, callerTable, mixinsOf, nodeIDFor, rolesOf, SERVICE_ROLES } from "./bus-identity";
import { perSenderChannel } from "./channels";

/** An event a service sends to other processes, declared on its schema (`emits`). */
export type EventDeclaration = { event: string; kind: "broadcast" | "emit" };

/** Events that cross processes: who sends them, who handles them, and how. */
export type BusEvent = { event: string; from: readonly string[]; to: readonly string[]; kind: "broadcast" | "emit" };

/** Durable per-sender channels (lib/channels.ts): publishers send under their own node id. */
export type BusChannel = { channel: string; publishers: readonly string[]; consumers: readonly string[] };

/** What the permissions are made of, all read off the services' schemas (`busTables`). */
export type BusTables = { callers: readonly CallerTableRow[]; events: readonly BusEvent[]; channels: readonly BusChannel[] };

/** The keys of a schema section, its mixins' included. */
function keysOf(schema: ServiceSchema, section: "events" | "channels"): string[] {
  return [...new Set([...mixinsOf(schema).flatMap((m) => keysOf(m, section)), ...Object.keys(schema[section] ?? {})])];
}

/**
 * The bus tables of these services (pure: schemas in, rows out). An event goes from the services
 * whose `emits` declare it to those with a handler in `events`; a channel from the services whose
 * `publishes` name it to those consuming its per-sender key in `channels`.
 */
export function busTables(schemas: readonly ServiceSchema[]): BusTables {
  const namesOf = (wanted: (s: ServiceSchema) => boolean) => schemas.filter(wanted).map((s) => s.name);
  const declared = schemas.flatMap((s) => s.emits ?? []);
  const events = [...new Set(declared.map((d) => d.event))].sort().map((event): BusEvent => {
    const kinds = [...new Set(declared.filter((d) => d.event === event).map((d) => d.kind))];
    if (kinds.length > 1) throw new Error(`Event "${event}" is declared both broadcast and emit`);
    const from = namesOf((s) => (s.emits ?? []).some((d) => d.event === event));
    return { event, from, to: namesOf((s) => keysOf(s, "events").includes(event)), kind: kinds[0] };
  });
  const channels = [...new Set(schemas.flatMap((s) => s.publishes ?? []))].sort().map((channel): BusChannel => ({
    channel,
    publishers: namesOf((s) => (s.publishes ?? []).includes(channel)),
    consumers: namesOf((s) => keysOf(s, "channels").includes(perSenderChannel(channel))),
  }));
  return { callers: callerTable([...schemas]), events, channels };
}

export const DEAD_LETTER = "dead-letter";

export type Permissions = { publish: string[]; subscribe: string[] };

export type PermissionInputs = BusTables & { namespace: string };

const CORE_MEMBERS = rolesOf(CORE_ROLE);
const TARGETED = ["RES", "DISCOVER", "INFO", "PING", "PONG"];
const BROADCAST = ["DISCOVER", "INFO", "DISCONNECT", "HEARTBEAT", "PING"];

/** A role and the process roles that may host it (a core service also runs inside "core"). */
const hosts = (role: string): string[] => (CORE_MEMBERS.includes(role) ? [role, CORE_ROLE] : [role]);
const serviceOf = (action: string) => action.slice(0, action.indexOf("."));
const unique = (list: string[]) => [...new Set(list)].sort();

/** The user name of a core role, or of the gpu-node called `name`. */
export const roleUser = (role: string) => role;
export const gpuNodeUser = (name: string) => `gpu-node.${name}`;

/**
 * Permissions of one bus user. `sender` is the node-id pattern it publishes under: `<role>.*` for
 * a core role (any instance), `gpu-node.<name>` for one gpu-node (exactly its own id).
 */
function permissionsFor(role: string, sender: string, inputs: PermissionInputs): Permissions {
  const P = inputs.namespace ? `MOL-${inputs.namespace}` : "MOL";
  const C = inputs.namespace ? `${inputs.namespace}.` : "";
  const services = rolesOf(role);
  const mine = (list: readonly string[]) => list.some((r) => services.includes(r) || r === role);
  const isNode = role === "gpu-node";
  const pub: string[] = [];
  const sub: string[] = [];

  // Discovery and liveness: broadcast under its own id, answers to anyone.
  for (const cmd of BROADCAST) pub.push(`${P}.${cmd}.${sender}`);
  for (const cmd of ["DISCOVER", "INFO", "PING", "PONG"]) pub.push(`${P}.${cmd}.*.*.${sender}`);
  for (const cmd of BROADCAST) sub.push(`${P}.${cmd}.*.*`);
  for (const cmd of TARGETED) sub.push(`${P}.${cmd}.${sender}.*.*`);
  for (const cmd of ["REQ", "EVENT"]) sub.push(`${P}.${cmd}.${sender}.>`); // `.<action or event>.<sender>`

  // Calls it may make, per action: to one node of the service's role (Moleculer's balancer, and
  // moleculer-web, pick the node) or to the action's queue (disableBalancer).
  for (const row of inputs.callers) {
    if (!mine(row.callers)) continue;
    for (const host of hosts(serviceOf(row.action))) pub.push(`${P}.REQ.${host}.*.${row.action}.${sender}`);
    pub.push(`${P}.REQB.${row.action}.${sender}`);
  }
  // Answers: a gpu-node only to those who may call it; core roles to whoever called them.
  if (isNode) {
    const callers = inputs.callers.filter((r) => serviceOf(r.action) === "gpu-node").flatMap((r) => r.callers.flatMap(hosts));
    for (const caller of unique(callers)) pub.push(`${P}.RES.${caller}.*.${sender}`);
  } else {
    pub.push(`${P}.RES.*.*.${sender}`);
  }
  // Requests and grouped events for its own services.
  for (const service of services) sub.push(`${P}.REQB.${service}.>`, `${P}.EVENTB.${service}.>`);

  for (const e of inputs.events) {
    if (!mine(e.from)) continue;
    for (const to of unique(e.to.flatMap(hosts))) pub.push(`${P}.EVENT.${to}.*.${e.event}.${sender}`);
    if (e.kind === "emit") for (const group of e.to) pub.push(`${P}.EVENTB.${group}.${e.event}.${sender}`);
  }

  // JetStream: every process's channels client asks for account info; consumers manage their streams.
  pub.push("$JS.API.INFO");
  sub.push(`_INBOX.${sender}.>`);
  for (const ch of inputs.channels) {
    if (mine(ch.publishers)) pub.push(`${C}${ch.channel}.${sender}`);
    if (mine(ch.consumers)) {
      pub.push("$JS.API.>", "$JS.ACK.>", "$JS.FC.>", `${C}${DEAD_LETTER}`);
      sub.push(`${C}${sender}.>`); // push-consumer delivery subjects start with the node id
    }
  }
  return { publish: unique(pub), subscribe: unique(sub) };
}

/** Every user of a platform: one per process role, one per gpu-node. */
export function busPermissions(inputs: PermissionInputs, gpuNodes: readonly string[]): Record<string, Permissions> {
  const users: Record<string, Permissions> = {};
  for (const role of [...SERVICE_ROLES.filter((r) => r !== "gpu-node"), CORE_ROLE]) users[roleUser(role)] = permissionsFor(role, `${role}.*`, inputs);
  for (const name of gpuNodes) users[gpuNodeUser(name)] = permissionsFor("gpu-node", nodeIDFor("gpu-node", name), inputs);
  return users;
}

/** A gpu-node name, e.g. a Kubernetes node name; in its node id, dots become dashes (`nodeIDFor`). */
export const GPU_NODE_NAME = /^[A-Za-z0-9_.-]+$/;
