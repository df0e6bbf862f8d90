/**
 * bench:databases — the platform under measurement: gateway, auth and dbaas in one process on the
 * tenant cluster (loopback), an account registered over HTTP, and its teardown (the process
 * stopped, whatever it left on the tenant server purged by its marker, its state database dropped).
 */
import { randomUUID } from "crypto";
import { ChildService, dropDatabase, freePort, http, spawnServices, testDatabaseUrl, waitFor } from "../test/support/platform";
import { purgeMarked, tenantEnv, withClient } from "../test/integration/dbaas.helpers";

export type BenchPlatform = { base: string; token: string; proc: ChildService; stop: () => Promise<void> };

/** Starts the platform with `env` over the tenant defaults (tenantEnv(limits)) and registers an account. */
export async function startBenchPlatform(limits: Record<string, string>, env: Record<string, string>): Promise<BenchPlatform> {
  const databaseUrl = testDatabaseUrl();
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const proc = spawnServices(["api-gateway", "auth", "dbaas"], {
    ...tenantEnv(limits),
    ...env,
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    TRANSPORTER: "",
    LOG_LEVEL: "error",
  });
  let marker: string | undefined;
  const stop = async () => {
    await proc.stop();
    if (marker) await purgeMarked(marker).catch(() => undefined);
    await dropDatabase(databaseUrl).catch(() => undefined);
  };
  try {
    await waitFor(
      async () => {
        if (proc.proc.exitCode !== null) throw new Error(proc.output());
        return (await http(base, "GET", "/api/databases").catch(() => undefined))?.status === 401;
      },
      { timeoutMs: 30_000, message: "the platform to answer" },
    );
    const reg = await http(base, "POST", "/api/auth/register", {
      body: { email: `bench-${randomUUID()}@example.com`, name: "Bench", password: "password-123" },
    });
    marker = await withClient(databaseUrl, async (c) => `ci-platform:dbaas:${(await c.query("SELECT id FROM dbaas.instance")).rows[0].id}`);
    return { base, token: reg.body.accessToken as string, proc, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
