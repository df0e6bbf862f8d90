/** Replicas of one service in child processes, joined to a test platform's bus one after the other. */
import { ChildService, spawnServices, TestPlatform, waitFor } from "./platform";

/**
 * Starts `count` processes running `service` with `env`, each waited for on the platform's registry
 * before the next (the first creates the service's schema); their output is in the error when one fails.
 */
export async function spawnReplicas(platform: TestPlatform, service: string, count: number, env: Record<string, string>): Promise<ChildService[]> {
  const children: ChildService[] = [];
  const available = () => platform.broker.registry.getServiceList({ onlyAvailable: true }).filter((s: { name: string }) => s.name === service).length;
  for (let i = 0; i < count; i++) {
    children.push(spawnServices([service], env));
    await waitFor(() => available() === children.length, { timeoutMs: 30_000, message: `${service} replica ${i + 1}` }).catch((err) => {
      throw new Error(`${err.message}\n${children.map((c) => c.output()).join("\n")}`);
    });
  }
  return children;
}
