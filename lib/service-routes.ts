/**
 * Which platform service owns which REST paths (its `settings.rest` under /api). The gateway
 * uses it to answer 503, not 404, for the paths of a service that is not running right now:
 * clients retry a 503. The table is derived from the services' schemas (moleculer.config.ts
 * platformRestBases) and handed to the gateway when it is created.
 */
import type { ServiceSchema } from "moleculer";

export const API_PREFIX = "/api";

export type RestBase = readonly [base: string, service: string];

/** The REST bases of these [name, schema] pairs (the gateway's own routes excluded). */
export function restBasesOf(schemas: ReadonlyArray<readonly [name: string, schema: ServiceSchema]>): RestBase[] {
  return schemas
    .map(([name, schema]) => [schema.settings?.rest, name] as const)
    .filter((entry): entry is RestBase => typeof entry[0] === "string" && entry[1] !== "api-gateway");
}

/** The service whose routes `path` (without query) falls under, if any. */
export function serviceOwning(path: string, bases: readonly RestBase[]): string | undefined {
  for (const [base, service] of bases) {
    const prefix = API_PREFIX + base;
    if (path === prefix || path.startsWith(`${prefix}/`)) return service;
  }
  return undefined;
}
