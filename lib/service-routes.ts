/**
 * Which platform service owns which REST paths (its `settings.rest` under /api). The gateway
 * uses it to answer 503, not 404, for the paths of a service that is not running right now:
 * clients retry a 503. The table is derived from the services' schemas (moleculer.config.ts
 * platformRestBases) and handed to the gateway when it is created.
 */
import type { ServiceSchema } from "moleculer";

export const API_PREFIX = "/api";

export type RestBase = readonly [base: string, service: string];

/**
 * The REST bases of these [name, schema] pairs (the gateway's own routes excluded): each
 * service's `settings.rest` (a base or a list), and every `basePath` its actions' routes name
 * (moleculer-web's `rest: { method, basePath, path }`), so a second base is known too.
 */
export function restBasesOf(schemas: ReadonlyArray<readonly [name: string, schema: ServiceSchema]>): RestBase[] {
  const bases: RestBase[] = [];
  for (const [name, schema] of schemas) {
    if (name === "api-gateway") continue;
    const own = schema.settings?.rest as unknown;
    const named = Object.values(schema.actions ?? {}).flatMap((action) => {
      const rest = typeof action === "object" && action !== null ? (action as { rest?: unknown }).rest : undefined;
      return (Array.isArray(rest) ? rest : [rest]).map((r) => (typeof r === "object" && r !== null ? (r as { basePath?: unknown }).basePath : undefined));
    });
    for (const base of [...(Array.isArray(own) ? own : [own]), ...named])
      if (typeof base === "string" && !bases.some(([b]) => b === base)) bases.push([base, name]);
  }
  return bases;
}

/**
 * The service whose routes `path` (without query) falls under, if any: the longest base that
 * holds it, so a service may own a path under another's base (metrics' /gpu/status/history).
 */
export function serviceOwning(path: string, bases: readonly RestBase[]): string | undefined {
  let owner: RestBase | undefined;
  for (const entry of bases) {
    const prefix = API_PREFIX + entry[0];
    if ((path === prefix || path.startsWith(`${prefix}/`)) && entry[0].length > (owner?.[0].length ?? -1)) owner = entry;
  }
  return owner?.[1];
}
