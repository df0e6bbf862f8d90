/**
 * Which platform service owns which REST paths (its `settings.rest` under /api). The gateway
 * uses it to answer 503, not 404, for the paths of a service that is not running right now:
 * clients retry a 503. A unit test pins this table to the services' schemas.
 */
export const API_PREFIX = "/api";

export const REST_BASES: ReadonlyArray<readonly [base: string, service: string]> = [
  ["/auth", "auth"],
  ["/gpu", "gpu-scheduler"],
  ["/models", "inference"],
  ["/databases", "dbaas"],
];

/** The service whose routes `path` (without query) falls under, if any. */
export function serviceOwning(path: string): string | undefined {
  for (const [base, service] of REST_BASES) {
    const prefix = API_PREFIX + base;
    if (path === prefix || path.startsWith(`${prefix}/`)) return service;
  }
  return undefined;
}
