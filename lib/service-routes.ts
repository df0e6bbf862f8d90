/**
 * Which platform service owns which REST paths (its `settings.rest` under /api). The gateway
 * uses it to answer 503, not 404, for the paths of a service that is not running right now:
 * clients retry a 503. The table is derived from the services' schemas (moleculer.config.ts
 * platformRestBases) and handed to the gateway when it is created.
 */
import type { ServiceSchema } from "moleculer";

export const API_PREFIX = "/api";

export type RestBase = readonly [base: string, service: string];

/** The bases a service serves: its `settings.rest`, and any `basePath` of an action's `rest` object (a second base, e.g. /quotas). */
function basesOf(schema: ServiceSchema): string[] {
  const own = typeof schema.settings?.rest === "string" ? [schema.settings.rest] : [];
  const extra = Object.values(schema.actions ?? {}).flatMap((a) => {
    const rest = typeof a === "object" && a !== null ? (a as { rest?: unknown }).rest : undefined;
    const base = typeof rest === "object" && rest !== null ? (rest as { basePath?: unknown }).basePath : undefined;
    return typeof base === "string" ? [base] : [];
  });
  return [...new Set([...own, ...extra])];
}

/** The REST bases of these [name, schema] pairs (the gateway's own routes excluded). */
export function restBasesOf(schemas: ReadonlyArray<readonly [name: string, schema: ServiceSchema]>): RestBase[] {
  return schemas.filter(([name]) => name !== "api-gateway").flatMap(([name, schema]) => basesOf(schema).map((base) => [base, name] as const));
}

/** The service whose routes `path` (without query) falls under, if any. */
export function serviceOwning(path: string, bases: readonly RestBase[]): string | undefined {
  for (const [base, service] of bases) {
    const prefix = API_PREFIX + base;
    if (path === prefix || path.startsWith(`${prefix}/`)) return service;
  }
  return undefined;
}
