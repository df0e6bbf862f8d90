/**
 * Liveness and readiness of every process, over plain HTTP on HEALTH_PORT (not through the
 * gateway, so a gpu-node or an auth replica answers its own probes):
 * - `GET /live`: 200 while the process runs (a probe failing here means "restart me");
 * - `GET /ready`: 200 only when the broker is started and not draining, every service this process
 *   runs has started (`services`), the transporter is
 *   connected, every local service's declared `dependencies` are registered, and every readiness
 *   check a service contributed (`addReadinessCheck`, e.g. PostgreSQL in DbMixin) answers in time;
 *   503 otherwise, with the failing checks named.
 */
import http from "http";
import type { AddressInfo } from "net";
import type { Middleware, Service, ServiceBroker } from "moleculer";
import { platformSettingsOf, type PlatformSettings } from "./platform-settings";

export type ReadinessCheck = () => Promise<unknown>;
export type CheckResult = { ok: boolean; error?: string };
export type Readiness = { ready: boolean; checks: Record<string, CheckResult> };

type HealthState = { checks: Map<string, ReadinessCheck>; draining: boolean; server?: http.Server; started: WeakSet<Service>; tracking: boolean };

const states = new WeakMap<ServiceBroker, HealthState>();

function stateOf(broker: ServiceBroker): HealthState {
  let state = states.get(broker);
  if (!state) {
    state = { checks: new Map(), draining: false, started: new WeakSet(), tracking: false };
    states.set(broker, state);
  }
  return state;
}

/** Lets a service make its process unready while `check` rejects or times out. */
export function addReadinessCheck(service: Service, name: string, check: ReadinessCheck): void {
  stateOf(service.broker).checks.set(`${service.fullName}.${name}`, check);
}

/** The services this process runs (moleculer's internal `$node` aside). */
const ownServices = (broker: ServiceBroker): Service[] => broker.services.filter((s) => !s.name.startsWith("$"));

/** The services this process runs whose `started` has not completed yet (all of them before the broker starts). */
export function servicesStarting(broker: ServiceBroker): string[] {
  const { started, tracking } = stateOf(broker);
  // Without HealthMiddleware (a bare test broker) only the broker's own flag tells.
  return ownServices(broker)
    .filter((s) => (tracking ? !started.has(s) : !broker.started))
    .map((s) => s.fullName);
}

/** From now on the process answers "not ready" (SIGTERM received: load balancers must stop sending). */
export function markDraining(broker: ServiceBroker): void {
  stateOf(broker).draining = true;
}

/** Where this broker's health server listens (tests use HEALTH_PORT=0). */
export function healthAddress(broker: ServiceBroker): AddressInfo | undefined {
  const address = stateOf(broker).server?.address();
  return address && typeof address === "object" ? address : undefined;
}

/** `work`, or a rejection once `ms` have passed without its end. */
export function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

type TransitLike = { connected?: boolean; tx?: { client?: { rtt?: () => Promise<number> } } };

/** The transporter answers: connected, and for NATS a round trip to the server succeeds. */
async function transporterCheck(broker: ServiceBroker): Promise<void> {
  const transit = (broker as unknown as { transit?: TransitLike }).transit;
  if (!transit) return;
  if (!transit.connected) throw new Error("transporter is not connected");
  // moleculer keeps `connected` true while nats.js reconnects; a ping tells the truth.
  const client = transit.tx?.client;
  if (client && typeof client.rtt === "function") await client.rtt();
}

type Dependency = string | { name: string; version?: string | number };

function missingDependencies(broker: ServiceBroker): string[] {
  const missing: string[] = [];
  for (const service of broker.services) {
    const declared = ([] as Dependency[]).concat((service.schema.dependencies as Dependency[] | undefined) ?? []);
    for (const dep of declared) {
      const name = typeof dep === "string" ? dep : dep.version !== undefined ? `v${dep.version}.${dep.name}` : dep.name;
      if (!(broker.registry as unknown as { hasService(n: string): boolean }).hasService(name)) missing.push(name);
    }
  }
  return missing;
}

export async function evaluateReadiness(broker: ServiceBroker, timeoutMs = platformSettingsOf(broker).readyCheckTimeoutMs): Promise<Readiness> {
  const state = stateOf(broker);
  const checks: Record<string, CheckResult> = {};
  checks.broker = state.draining
    ? { ok: false, error: "draining" }
    : broker.stopping
      ? { ok: false, error: "stopping" }
      : broker.started
        ? { ok: true }
        : { ok: false, error: "starting" };
  const starting = servicesStarting(broker);
  checks.services = starting.length ? { ok: false, error: `starting: ${starting.join(", ")}` } : { ok: true };
  const missing = missingDependencies(broker);
  checks.dependencies = missing.length ? { ok: false, error: `not available: ${missing.join(", ")}` } : { ok: true };

  const named: Array<[string, ReadinessCheck]> = [["transporter", () => transporterCheck(broker)], ...state.checks];
  await Promise.all(
    named.map(async ([name, check]) => {
      try {
        await withTimeout(Promise.resolve().then(check), timeoutMs);
        checks[name] = { ok: true };
      } catch (err) {
        checks[name] = { ok: false, error: (err as Error)?.message || String(err) };
      }
    }),
  );
  return { ready: Object.values(checks).every((c) => c.ok), checks };
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store" });
  res.end(JSON.stringify(body));
}

function createHealthServer(broker: ServiceBroker): http.Server {
  return http.createServer((req, res) => {
    const url = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, { status: "method not allowed" });
    if (url === "/live") return send(res, 200, { status: "ok", nodeID: broker.nodeID, uptimeS: Math.round(process.uptime()) });
    if (url === "/ready") {
      evaluateReadiness(broker).then(
        (r) => send(res, r.ready ? 200 : 503, { status: r.ready ? "ready" : "not ready", nodeID: broker.nodeID, checks: r.checks }),
        (err) => send(res, 503, { status: "not ready", error: String(err) }),
      );
      return;
    }
    send(res, 404, { status: "not found" });
  });
}

/**
 * Starts the health server when the broker is created and closes it when the broker has stopped;
 * records each local service as it starts, and logs `ready: <services>` once all have.
 */
export function HealthMiddleware(settings: Pick<PlatformSettings, "healthPort" | "listenHost">): Middleware {
  return {
    created(broker: ServiceBroker) {
      stateOf(broker).tracking = true;
      // Like the health server, the metrics endpoint must not keep a finished process alive.
      const reporters = (broker.metrics as unknown as { reporter?: Array<{ server?: { unref?(): void } }> }).reporter;
      for (const r of reporters ?? []) r.server?.unref?.();
      const port = settings.healthPort;
      if (port === null) return;
      const server = createHealthServer(broker);
      // A probe port taken by something else must not take the process down; the probes will say.
      server.on("error", (err) => broker.logger.error(`Health endpoints unavailable: ${err.message}`));
      server.listen(port, settings.listenHost, () => {
        broker.logger.info(`Health endpoints on :${(server.address() as AddressInfo).port} (/live, /ready)`);
      });
      server.unref(); // never keeps a process alive on its own
      stateOf(broker).server = server;
    },
    serviceStarted(service: Service) {
      stateOf(service.broker).started.add(service);
    },
    serviceStopping(service: Service) {
      stateOf(service.broker).started.delete(service);
    },
    started(broker: ServiceBroker) {
      // One line operators and scripts can wait for: every service this process runs is up.
      if (!servicesStarting(broker).length)
        broker.logger.info(
          `ready: ${ownServices(broker)
            .map((s) => s.fullName)
            .join(", ")}`,
        );
    },
    async stopped(broker: ServiceBroker) {
      const server = stateOf(broker).server;
      if (!server?.listening) return;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  } as unknown as Middleware;
}
