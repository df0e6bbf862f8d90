/**
 * An end-to-end platform as operators run it: services in separate Node processes on a real NATS
 * bus, optionally one broker in this process (whose registry and services a test can reach), all in
 * one fresh namespace and database; the gateway listens on a free port wherever it runs. stop()
 * ends the processes and brokers, then removes the namespace's JetStream streams, the database and
 * the work folder, so a test file leaves nothing behind.
 */
import { rmSync } from "fs";
import { connect } from "nats";
import {
  ChildService,
  dropDatabase,
  freePort,
  HttpResult,
  NATS_URL,
  routed,
  spawnServices,
  startTestPlatform,
  TestPlatform,
  testDatabaseUrl,
  uniqueName,
  waitFor,
} from "./platform";

/** The services of one child process, with settings of its own over the platform's. */
export type ProcessSpec = string[] | { services: string[]; env?: Record<string, string> };

export type NatsPlatformOptions = {
  /** The namespace (default: a fresh one, `prefix` + random). */
  namespace?: string;
  prefix?: string;
  /** The platform's database (default: a fresh one, dropped by stop()). */
  databaseUrl?: string;
  /** Every process's TRANSPORTER (default the shared NATS server); "" is the in-process bus, for one process. */
  transporter?: string;
  /** Settings of every process and of the broker in this process. */
  env?: Record<string, string>;
  /** One child process per entry, started at once, side by side. */
  processes?: ProcessSpec[];
  /** Services on a broker in this process, started after the child processes. */
  local?: string[];
  /** Settings of the broker in this process only (undefined unsets one). */
  localEnv?: Record<string, string | undefined>;
  /** Returns once the gateway routes this `[method, path]` (a child exiting first fails at once, with its output). */
  route?: [string, string];
  readyTimeoutMs?: number;
  /** Awaited last (after `route`), e.g. `(p) => p.waitFor(…)`; when it fails, stop() runs before the error is thrown. */
  ready?: (platform: NatsPlatform) => Promise<unknown>;
  /** How stop() ends the child processes (default SIGKILL: what they would do after the test does not matter). */
  stopSignal?: NodeJS.Signals;
  /** A folder of the test's (its jobs' files, logs) that stop() removes. */
  work?: string;
};

export type NatsPlatform = {
  namespace: string;
  databaseUrl: string;
  /** What every process was started with: TRANSPORTER, NAMESPACE, DATABASE_URL and the options' env. */
  env: Record<string, string>;
  /** The gateway's address: the local broker's when it runs the gateway, else the port handed to a child's. */
  baseUrl: string;
  /** The broker in this process, when `local` named services. */
  local?: TestPlatform;
  /** Every child process started so far, spawned or restarted ones included. */
  children: ChildService[];
  /** Starts `services` in one more child process on the platform's bus; stop() ends it. */
  spawn(services: string[], env?: Record<string, string>): ChildService;
  /** Starts `count` processes running `service`, each waited for in the local broker's registry before the next. */
  replicas(service: string, count: number, env?: Record<string, string>): Promise<ChildService[]>;
  /** Throws, with its output, when a child process has exited. */
  alive(): void;
  /** Waits on `probe` as waitFor does, failing at once (with its output) when a child process exits. */
  waitFor<T>(probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, opts?: Parameters<typeof waitFor>[1]): Promise<T>;
  /** Waits until the gateway routes `method path`, failing at once when a child process exits. */
  waitForRoute(method: string, urlPath: string, timeoutMs?: number): Promise<HttpResult>;
  stop(): Promise<void>;
};

const DIED = Symbol("a service process died");
const exited = (c: ChildService) => c.proc.exitCode !== null || c.proc.signalCode !== null;

/** Removes the JetStream streams of `namespace` (channels are `<namespace>_<channel>`) from the shared NATS server. */
export async function deleteNamespaceStreams(namespace: string): Promise<void> {
  const nc = await connect({ servers: new URL(NATS_URL).host });
  try {
    const jsm = await nc.jetstreamManager();
    const names: string[] = [];
    for await (const name of jsm.streams.names()) if (name.startsWith(`${namespace}_`)) names.push(name);
    await Promise.all(names.map((name) => jsm.streams.delete(name).catch(() => undefined)));
  } finally {
    await nc.close();
  }
}

export async function startNatsPlatform(opts: NatsPlatformOptions = {}): Promise<NatsPlatform> {
  const namespace = opts.namespace ?? uniqueName(opts.prefix ?? "t");
  const databaseUrl = opts.databaseUrl ?? testDatabaseUrl();
  const transporter = opts.transporter ?? NATS_URL;
  const env = { TRANSPORTER: transporter, NAMESPACE: namespace, DATABASE_URL: databaseUrl, ...opts.env };
  const gatewayPort = await freePort();
  const children: ChildService[] = [];
  const stopped = new Set<ChildService>();

  const spawn = (services: string[], own: Record<string, string> = {}) => {
    const port: Record<string, string> = services.includes("api-gateway") ? { PORT: String(gatewayPort) } : {};
    const started = spawnServices(services, { ...env, ...port, ...own });
    // one the test stops itself is not a process that died
    const child: ChildService = { ...started, stop: (signal) => (stopped.add(child), started.stop(signal)) };
    children.push(child);
    return child;
  };
  const died = () => children.find((c) => !stopped.has(c) && exited(c));
  const alive = () => {
    const gone = died();
    if (gone) throw new Error(`a service process exited (${gone.proc.exitCode ?? gone.proc.signalCode}):\n${gone.output().slice(-4000)}`);
  };
  const watched: NatsPlatform["waitFor"] = async <T>(probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, waitOpts = {}) => {
    // waitFor retries a probe that throws: a process that died ends the wait with a value instead
    const value = await waitFor<T | typeof DIED>(() => (died() ? DIED : probe()), waitOpts).catch((err: Error) => {
      err.message += children.map((c) => `\n--- a service process's output:\n${c.output().slice(-2000)}`).join("");
      throw err;
    });
    if (value === DIED) alive();
    return value as T;
  };

  let stopping: Promise<void> | undefined;
  const stopAll = async () => {
    await Promise.all(children.map((c) => c.stop(opts.stopSignal ?? "SIGKILL")));
    await platform.local?.stop();
    if (transporter === NATS_URL) await deleteNamespaceStreams(namespace).catch(() => undefined);
    if (!opts.databaseUrl) await dropDatabase(databaseUrl).catch(() => undefined);
    if (opts.work) rmSync(opts.work, { recursive: true, force: true });
  };

  const platform: NatsPlatform = {
    namespace,
    databaseUrl,
    env,
    baseUrl: `http://127.0.0.1:${gatewayPort}`,
    children,
    spawn,
    alive,
    waitFor: watched,
    waitForRoute: (method, urlPath, timeoutMs = 30_000) =>
      watched(() => routed(platform.baseUrl, method, urlPath).catch((): false => false), { timeoutMs, message: `route ${method} ${urlPath}` }),
    async replicas(service, count, own = {}) {
      const registry = platform.local?.broker.registry;
      if (!registry) throw new Error("replicas are counted in the local broker's registry: start the platform with `local` services");
      const available = () => registry.getServiceList({ onlyAvailable: true }).filter((s: { name: string }) => s.name === service).length;
      const started: ChildService[] = [];
      for (let i = 0; i < count; i++) {
        started.push(spawn([service], own));
        await watched(() => available() === started.length, { timeoutMs: 30_000, message: `${service} replica ${i + 1}` });
      }
      return started;
    },
    stop: () => (stopping ??= stopAll()),
  };

  try {
    for (const spec of opts.processes ?? []) spawn(Array.isArray(spec) ? spec : spec.services, Array.isArray(spec) ? {} : spec.env);
    if (opts.local?.length) {
      platform.local = await startTestPlatform({
        services: opts.local,
        transporter: transporter || undefined,
        namespace,
        databaseUrl,
        dropDatabase: false,
        env: { ...env, ...opts.localEnv },
      });
      if (platform.local.baseUrl) platform.baseUrl = platform.local.baseUrl;
    }
    if (opts.route) await platform.waitForRoute(opts.route[0], opts.route[1], opts.readyTimeoutMs);
    await opts.ready?.(platform);
  } catch (err) {
    // a set-up that fails ends what it started: left running, it would keep jest from exiting
    await platform.stop();
    throw err;
  }
  return platform;
}
