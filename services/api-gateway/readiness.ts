/**
 * The gateway's own readiness (lib/health.ts): ready once it has generated routes from at least
 * one service and from every service of its own process that has REST routes. Until then API paths
 * would answer 404 and the reference would be partial, e.g. just after start while the debounced
 * alias generation has not run yet. Latched: services leaving later give 503s, which say more to
 * a client than a gateway taken out of the load balancer.
 */
import type { ServiceBroker } from "moleculer";
import { servicesStarting } from "../../lib/health";
import { restBasesOf } from "../../lib/service-routes";

type GatewayLike = { broker: ServiceBroker; aliases?: Array<{ _generated?: boolean; action?: string | null }> };

/** Why the routes are not complete yet; null when they are. */
function routesPending(gateway: GatewayLike): string | null {
  const generated = (gateway.aliases ?? []).filter((alias) => alias._generated === true);
  if (!generated.length) return "no service routes generated yet";
  const owners = new Set(generated.map((alias) => (alias.action ?? "").slice(0, (alias.action ?? "").lastIndexOf("."))));
  const missing = gateway.broker.services
    .filter((s) => s.name !== "api-gateway" && restBasesOf([[s.name, s.schema]]).length > 0 && !owners.has(s.fullName))
    .map((s) => s.fullName);
  return missing.length ? `routes not generated yet: ${missing.join(", ")}` : null;
}

export function routesReadiness(gateway: GatewayLike): () => Promise<void> {
  let complete = false;
  return async () => {
    const pending = complete ? null : routesPending(gateway);
    if (pending) throw new Error(pending);
    complete = true;
  };
}

/**
 * Why the OpenAPI document would be partial now (services of this process still starting, or
 * their routes not generated yet); null when it is complete. Services of other processes appear
 * as they are discovered: their paths answer 503 until then.
 */
export function documentPending(gateway: GatewayLike): string | null {
  const starting = servicesStarting(gateway.broker);
  if (starting.length) return `starting: ${starting.join(", ")}`;
  return routesPending(gateway);
}
