/**
 * Two gateway replicas over NATS, as the revocation rules are tested (a rotated API key, a deleted
 * restricted token): the platform with a second gateway process, and a probe of both replicas
 * until each refuses, noting any answer sent after the rule's bound that was not refused.
 */
import { freePort, HttpResult, routed } from "./platform";
import { NatsPlatform, startNatsPlatform } from "./nats-platform";

/** A credential revoked may be trusted by a replica at most this long after the revocation answered. */
export const REVOCATION_RULE_MS = 1_000;

/** `backend` processes, a gateway and a second gateway replica; ready once both route `route`. */
export async function startTwoGateways(
  prefix: string,
  backend: string[],
  route: [string, string],
  env: Record<string, string>,
): Promise<{ platform: NatsPlatform; replicas: string[] }> {
  const secondPort = await freePort();
  const platform = await startNatsPlatform({
    prefix,
    env,
    processes: [backend, ["api-gateway"], { services: ["api-gateway"], env: { PORT: String(secondPort) } }],
    route,
    readyTimeoutMs: 60_000,
  });
  const replicas = [platform.baseUrl, `http://127.0.0.1:${secondPort}`];
  await platform.waitFor(() => routed(replicas[1], route[0], route[1]).catch((): false => false), {
    timeoutMs: 60_000,
    message: "the second gateway to route",
  });
  return { platform, replicas };
}

/**
 * Probes every replica until each answers 401, from the moment the revocation answered; returns the
 * answers sent after REVOCATION_RULE_MS that were not 401 (the rule wants none).
 */
export async function untilRefusedEverywhere(
  platform: NatsPlatform,
  replicas: string[],
  probe: (base: string) => Promise<HttpResult>,
): Promise<Array<{ base: string; status: number }>> {
  const ruleFrom = Date.now() + REVOCATION_RULE_MS;
  const late: Array<{ base: string; status: number }> = [];
  const refused = new Set<string>();
  await platform.waitFor(
    async () => {
      for (const base of replicas) {
        const sentAt = Date.now();
        const res = await probe(base);
        if (res.status === 401) refused.add(base);
        else if (sentAt >= ruleFrom) late.push({ base, status: res.status });
      }
      return refused.size === replicas.length;
    },
    { timeoutMs: 15_000, intervalMs: 20, message: "every replica to refuse the revoked credential" },
  );
  return late;
}
