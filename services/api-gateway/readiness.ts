/**
 * The gateway's own readiness (lib/health.ts): ready once it has generated routes from at least
 * one service. Until then every API path would answer 404, e.g. just after start while the
 * debounced alias generation has not run yet. Latched: services leaving later give 503s, which
 * say more to a client than a gateway taken out of the load balancer.
 */
type GatewayLike = { aliases?: Array<{ _generated?: boolean }> };

export function routesReadiness(gateway: GatewayLike): () => Promise<void> {
  let seen = false;
  return async () => {
    seen ||= (gateway.aliases ?? []).some((alias) => alias._generated === true);
    if (!seen) throw new Error("no service routes generated yet");
  };
}
