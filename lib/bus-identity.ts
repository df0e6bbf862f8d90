/**
 * Who is on the bus, and who may call what. With bus security on, node ids are
 * `<role>.<instance>` and the transporter guarantees a packet's sender id belongs to the NATS user
 * that published it, so the role of `ctx.nodeID` can be trusted. Each action declares the roles
 * that may call it (`callers`); REST-facing actions default to the gateway, internal ones to no
 * remote caller. The same table feeds the NATS permissions (lib/bus-*.ts) and the Auth middleware.
 */
import type { ActionSchema, ServiceSchema } from "moleculer";

/** A process role per platform service; "core" is a process running several core services. */
export const SERVICE_ROLES = ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "inference", "dbaas", "metrics", "admin", "usage"] as const;
export type ServiceRole = (typeof SERVICE_ROLES)[number];
export const CORE_ROLE = "core";
const CORE_MEMBERS: readonly ServiceRole[] = SERVICE_ROLES.filter((r) => r !== "gpu-node");

const INSTANCE = /^[A-Za-z0-9_-]+$/;
const KNOWN_ROLES = new Set<string>([...SERVICE_ROLES, CORE_ROLE]);

/** The part of a node id before the first '.', or undefined when the id is not `<role>.<instance>`. */
export function roleOfNodeID(nodeID: string | null | undefined): string | undefined {
  if (typeof nodeID !== "string") return undefined;
  const dot = nodeID.indexOf(".");
  if (dot <= 0) return undefined;
  const role = nodeID.slice(0, dot);
  return KNOWN_ROLES.has(role) && INSTANCE.test(nodeID.slice(dot + 1)) ? role : undefined;
}

/** The service roles a node acts as ("core" stands for every core service). */
export function rolesOf(role: string): readonly string[] {
  return role === CORE_ROLE ? CORE_MEMBERS : [role];
}

/** The node id a process of `role` should use: `<role>.<instance>` (instance sanitised). */
export function nodeIDFor(role: string, instance: string): string {
  return `${role}.${instance.replace(/[^A-Za-z0-9_-]/g, "-")}`;
}

/** The roles that may call an action from another process. */
export function callersOf(action: ActionSchema): readonly string[] {
  return action.callers ?? (action.rest ? ["api-gateway"] : []);
}

/**
 * Whether a request from `senderNodeID` may run `callers`' action here. Without role-form node
 * ids (development, an unauthenticated bus) the sender cannot be trusted anyway: the check is
 * skipped, and account actions still need the signed caller token.
 */
export function senderMayCall(senderNodeID: string, callers: readonly string[]): boolean {
  const role = roleOfNodeID(senderNodeID);
  if (role === undefined) return true;
  return rolesOf(role).some((r) => callers.includes(r));
}

/**
 * Whether a node may offer service `name` in its INFO: only the services of its role (the table
 * the NATS permissions come from), and Moleculer's internal `$node`. A gpu-node declaring `auth`
 * would otherwise get a share of every login routed to it.
 */
export function senderMayHost(senderNodeID: string, name: string): boolean {
  if (name.startsWith("$")) return true;
  const role = roleOfNodeID(senderNodeID);
  return role !== undefined && rolesOf(role).includes(name);
}

export type CallerTableRow = { action: string; callers: readonly string[]; rest: boolean };

/** A schema's mixins, which Moleculer merges into the service. */
export const mixinsOf = (schema: ServiceSchema): ServiceSchema[] =>
  (Array.isArray(schema.mixins) ? schema.mixins : schema.mixins ? [schema.mixins] : []) as ServiceSchema[];

function actionsOf(schema: ServiceSchema): Record<string, ActionSchema> {
  const merged: Record<string, ActionSchema> = {};
  for (const mixin of mixinsOf(schema)) Object.assign(merged, actionsOf(mixin));
  for (const [name, def] of Object.entries(schema.actions ?? {})) {
    if (def === false) delete merged[name];
    else merged[name] = { ...(merged[name] ?? {}), ...(typeof def === "function" ? { handler: def } : (def as ActionSchema)) };
  }
  return merged;
}

/** Who may call each action of these services (pure: schemas in, rows out). */
export function callerTable(schemas: ServiceSchema[]): CallerTableRow[] {
  const rows: CallerTableRow[] = [];
  for (const schema of schemas)
    for (const [name, action] of Object.entries(actionsOf(schema))) {
      if (action.visibility === "private") continue; // never on the bus
      rows.push({ action: `${schema.name}.${name}`, callers: callersOf(action), rest: Boolean(action.rest) });
    }
  return rows.sort((a, b) => a.action.localeCompare(b.action));
}
