/**
 * Test harness: starts real services on a ServiceBroker (in-process bus, or NATS) against a
 * throw-away PostgreSQL database, with the gateway on port 0; plus an HTTP helper, condition
 * waits with deadlines, and child-process services for multi-process tests.
 */
import { ChildProcess, spawn } from "child_process";
import { randomBytes } from "crypto";
import net from "net";
import os from "os";
import path from "path";
import type { BrokerOptions, ServiceBroker } from "moleculer";
import { Client } from "pg";
import { createBroker, newBroker } from "../../moleculer.config";
import type { Env } from "../../lib/settings";

export const ADMIN_PG_URL = process.env.TEST_PG_ADMIN_URL || "postgresql://postgres@127.0.0.1:5432/postgres";
export const NATS_URL = process.env.TEST_NATS_URL || "nats://127.0.0.1:4222";
export const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
export const ROOT = path.resolve(__dirname, "../..");
/** The tenant cluster (.ci/setup.d/30-tenant-postgres.sh, scram): dbaas refuses the trust-auth main server. */
export const TENANT_ADMIN_URL = process.env.TEST_TENANT_ADMIN_URL || "postgresql://ci_admin:ci-tenant-admin@127.0.0.1:5433/postgres";

/** Where every test platform's dbaas provisions (a test may override any of these). */
export function dbaasDefaults(): Record<string, string> {
  const tenant = new URL(TENANT_ADMIN_URL);
  return {
    DBAAS_ADMIN_URL: TENANT_ADMIN_URL,
    DBAAS_PUBLIC_HOST: tenant.hostname,
    DBAAS_PUBLIC_PORT: tenant.port || "5432",
    // Test files share the cluster's 200 connections: a smaller budget per account fits more at once.
    DBAAS_CONNECTIONS_PER_ACCOUNT: "10",
    // Each platform its own snapshot store, never the checkout's data/ folder.
    DBAAS_SNAPSHOT_DIR: path.join(os.tmpdir(), "ci-platform-test-snapshots", uniqueName("s")),
  };
}

/** The account id in an access token (its `sub`), read without verifying it. */
export const clientIdOf = (jwt: string): string => JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString()).sub as string;

export const uniqueName = (prefix: string) => `${prefix}_${randomBytes(5).toString("hex")}`;

/** Polls `probe` until it returns a truthy value, or fails with `message` after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  { timeoutMs = 10_000, intervalMs = 25, message = "condition" } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value as T;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${message}${lastError ? `: ${String(lastError)}` : ""}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Runs `work` on a fresh superuser connection to the local server (ADMIN_PG_URL). */
export async function asPgAdmin<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: ADMIN_PG_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A fresh, empty database URL on the local server; the platform creates the database itself. */
export function testDatabaseUrl(): string {
  const url = new URL(ADMIN_PG_URL);
  url.pathname = `/${uniqueName("ci_test")}`;
  return url.toString();
}

/**
 * Drops the test database once the sessions its test closed have left (a pool's end() resolves
 * before its sockets close, and FORCE would end them mid-goodbye: their clients report
 * 57P01 to a pool that may have no listener); FORCE then ends only sessions a test leaked.
 */
export async function dropDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  await asPgAdmin(async (admin) => {
    const sessions = async () => (await admin.query("SELECT 1 FROM pg_stat_activity WHERE datname = $1", [name])).rowCount ?? 0;
    await waitFor(async () => (await sessions()) === 0, { timeoutMs: 5_000, message: `sessions on ${name} to close` }).catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
}

export type HttpResult<T = any> = { status: number; headers: Headers; body: T; text: string };

export async function http<T = any>(
  baseUrl: string,
  method: string,
  urlPath: string,
  opts: { body?: unknown; rawBody?: string; headers?: Record<string, string>; token?: string } = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined = opts.rawBody;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(`${baseUrl}${urlPath}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

export type TestPlatform = {
  broker: ServiceBroker;
  baseUrl: string;
  databaseUrl: string;
  namespace: string;
  /** The environment record its broker was created with (for a replica started beside it). */
  env: Env;
  stop(): Promise<void>;
};

/**
 * The environment record of a test broker: this process's environment, the test defaults, then
 * `overrides` (undefined unsets a variable). process.env itself is never changed.
 */
export function testEnv(overrides: Record<string, string | undefined> = {}): Env {
  return {
    ...process.env,
    PORT: "0",
    SCRYPT_LOG_N: "14", // OWASP cost is exercised in its own test; 2^14 keeps the suite fast
    LOG_LEVEL: process.env.TEST_LOG_LEVEL || "warn",
    HEALTH_PORT: "0", // any free port: parallel platforms never collide
    METRICS_PORT: "0",
    SHUTDOWN_TIMEOUT_S: "5", // stop() waits for running actions at most this long
    ...dbaasDefaults(),
    ...overrides,
  };
}

/**
 * A broker with no platform service (a test's sink or stand-in) on the test defaults; `overrides`
 * as for `new ServiceBroker`; a `transporter` is also its TRANSPORTER (channels on NATS follow it).
 */
export function testBroker(overrides: Partial<BrokerOptions>): ServiceBroker {
  const transporter = typeof overrides.transporter === "string" ? overrides.transporter : undefined;
  return newBroker(undefined, overrides, testEnv({ TRANSPORTER: transporter }));
}

/**
 * Starts `services` (default: all) in this process. `env`: settings over the test defaults (the
 * broker's environment record; each service parses its settings from it when created). With
 * `transporter` the broker joins that bus under a fresh namespace unless one is given.
 */
export async function startTestPlatform(
  opts: {
    services?: string[];
    env?: Record<string, string | undefined>;
    transporter?: string;
    namespace?: string;
    databaseUrl?: string;
    dropDatabase?: boolean;
    nodeID?: string;
  } = {},
): Promise<TestPlatform> {
  const databaseUrl = opts.databaseUrl ?? testDatabaseUrl();
  const namespace = opts.namespace ?? uniqueName("t");
  // The transporter as a process gets it (TRANSPORTER): a NATS URL gives the platform's own (lib/nats-transporter.ts), as in production.
  const env = testEnv({ DATABASE_URL: databaseUrl, NAMESPACE: namespace, ...opts.env, TRANSPORTER: opts.transporter ?? "" });
  const broker = createBroker(
    opts.services ?? [],
    {
      ...(opts.transporter ? {} : { transporter: undefined }),
      namespace,
      nodeID: opts.nodeID ?? uniqueName("node"),
    },
    env,
  );
  await broker.start();
  let baseUrl = "";
  const gateway = broker.getLocalService("api-gateway") as unknown as { server?: { address(): { port: number } } };
  if (gateway?.server) baseUrl = `http://127.0.0.1:${gateway.server.address().port}`;
  return {
    broker,
    baseUrl,
    databaseUrl,
    namespace,
    env,
    async stop() {
      await broker.stop();
      if (opts.dropDatabase !== false) await dropDatabase(databaseUrl).catch(() => undefined);
    },
  };
}

/**
 * The settings of a one-process GPU test platform whose gpu-node runs jobs as sandboxed
 * processes on one simulated card, with short heartbeats and ticks; logs under `work`.
 */
export function sandboxedGpuEnv(work: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    GPU_EXECUTOR: "process",
    GPU_SIMULATE: "Test GPU:1024",
    GPU_HEARTBEAT_S: "1",
    GPU_SCHEDULE_TICK_MS: "100",
    GPU_STOP_GRACE_S: "1",
    GPU_JOB_LOG_DIR: path.join(work, "logs"),
    ...extra,
  };
}

/** A gpu-node's relay for jobs with platformAccess: `platformUrl` and the tenant server of TENANT_ADMIN_URL. */
export function relayEnv(platformUrl: string): Record<string, string> {
  const tenant = new URL(TENANT_ADMIN_URL);
  return { GPU_RELAY_PLATFORM_URL: platformUrl, GPU_RELAY_DATABASE_HOST: tenant.hostname, GPU_RELAY_DATABASE_PORT: tenant.port || "5432" };
}

/** The gateway's answer to `method path` once it routes it (aliases are generated as services appear), else false. */
export async function routed(baseUrl: string, method: string, urlPath: string): Promise<HttpResult | false> {
  const res = await http(baseUrl, method, urlPath);
  return res.status !== 404 && res.status !== 503 ? res : false;
}

/** Waits until the gateway routes `method path`. */
export function waitForRoute(baseUrl: string, method: string, urlPath: string, timeoutMs = 15_000) {
  return waitFor(() => routed(baseUrl, method, urlPath), { timeoutMs, message: `route ${method} ${urlPath}` });
}

/**
 * A GPU test platform ready for jobs: once its gateway routes the GPU API, registers a new user
 * and waits until the cluster shows `cards` cards; returns that user's access token.
 */
export async function gpuTestUser(baseUrl: string, cards = 1): Promise<string> {
  await waitForRoute(baseUrl, "GET", "/api/gpu/status");
  const res = await http(baseUrl, "POST", "/api/auth/register", {
    body: { email: `gpu-${Date.now()}-${randomBytes(3).toString("hex")}@example.com`, name: "gpu user", password: "correct horse battery" },
  });
  const token: string = res.body.accessToken;
  await waitFor(async () => (await http(baseUrl, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === cards, {
    message: `${cards} card(s) announced`,
  });
  return token;
}

export type ChildService = { proc: ChildProcess; output: () => string; stop(signal?: NodeJS.Signals): Promise<number | null> };

/** Runs `index.ts` with SERVICES=`services` in a separate Node process. */
export function spawnServices(services: string[], env: Record<string, string>, nodeArgs: string[] = []): ChildService {
  const proc = spawn(process.execPath, ["--import", "tsx", ...nodeArgs, path.join(ROOT, "index.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      LOG_LEVEL: "warn",
      SCRYPT_LOG_N: "14",
      HEALTH_PORT: "0",
      METRICS_PORT: "0",
      SHUTDOWN_TIMEOUT_S: "5",
      ...dbaasDefaults(),
      ...env,
      SERVICES: services.join(","),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  proc.stdout!.on("data", (d) => (output += d));
  proc.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return {
    proc,
    output: () => output,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** A TCP port free on 127.0.0.1 right now (for child processes that must be told their port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.once("error", reject);
  });
}

/** Whether a process with this pid still exists (signal 0 only checks). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
