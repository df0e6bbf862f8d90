/**
 * The composition root: the broker options shared by every process, the service registry, and
 * `createBroker`, which builds a broker with the services this process runs (SERVICES, default
 * all) from the environment record it is given (process.env in production). Used by index.ts,
 * the tests and the benchmarks, so every mode starts the same way.
 *
 * TRANSPORTER picks the bus: unset, all services run in one process on the in-process bus;
 * `nats://host:4222`, each service can run in its own process.
 */
import fs from "fs";
import path from "path";
import { BrokerOptions, ServiceBroker, ServiceSchema } from "moleculer";
import { parsePlatformSettings, PlatformSettings, platformSettingsOf, rememberPlatformSettings } from "./lib/platform-settings";
import { RestBase, restBasesOf } from "./lib/service-routes";
import { Env, registerBrokerEnv } from "./lib/settings";
import { createChannelsMiddleware } from "./lib/channels";
import { AuthMiddleware } from "./middlewares/auth.middleware";
import { InputMiddleware } from "./middlewares/input.middleware";
import { UnknownFieldsMiddleware } from "./middlewares/unknown-fields.middleware";
import { HealthMiddleware } from "./lib/health";
import { ParamsValidator } from "./lib/params-validator";
import { jsonLineFormatter, RequestScopeMiddleware } from "./lib/logging";
import { metricsOptions } from "./lib/metrics";
import { busSetup } from "./lib/bus-connection";
import { CallerTableRow, callerTable, SERVICE_ROLES } from "./lib/bus-identity";
import { BusTables, busTables } from "./lib/bus-permissions";
import { BusTransporter } from "./lib/nats-transporter";

/**
 * `settings`: the process's platform settings (lib/platform-settings.ts); `services`: what it runs
 * (default SERVICES, empty = all), which decides the bus role and node id.
 */
export function brokerConfig(settings: PlatformSettings, services: readonly string[] = settings.services): BrokerOptions {
  const bus = busSetup(services, SERVICE_ROLES, settings);
  const url = settings.transporter;
  const logFormat = settings.logFormat;
  return {
    namespace: settings.namespace,
    // `<role>.<instance>`; on an authenticated bus the NATS user may publish only under it (lib/bus-subjects.ts).
    nodeID: bus.nodeID,
    // NATS: packets of one event-loop turn share one socket write; sender-bound subjects when authenticated.
    transporter: bus.connection ? new BusTransporter({ ...bus.connection, senderBound: bus.senderBound }) : url,
    logger: {
      type: "Console",
      options: {
        level: settings.logLevel,
        // JSON lines carry the request id of the action being served (lib/logging.ts).
        formatter: logFormat === "json" ? jsonLineFormatter : (logFormat as "short"),
        colors: logFormat !== "json",
        moduleColors: false,
        autoPadding: false,
      },
    },
    serializer: "JSON",
    requestTimeout: 30_000,
    retryPolicy: { enabled: false },
    // Service discovery happens fast on a LAN; 5 s heartbeats keep the bus quiet.
    heartbeatInterval: 5,
    heartbeatTimeout: 15,
    registry: { strategy: "RoundRobin", preferLocal: true },
    circuitBreaker: { enabled: false },
    // Params as TypeBox schemas or fastest-validator rules (lib/params-validator.ts).
    validator: new ParamsValidator(),
    errorHandler: undefined,
    middlewares: [
      // The request scope only feeds JSON lines' requestId; other formats skip its async-hooks cost.
      ...(logFormat === "json" ? [RequestScopeMiddleware] : []),
      // Listed before Auth, so it runs after it: an anonymous request with an unknown field is still 401.
      UnknownFieldsMiddleware,
      AuthMiddleware(settings),
      // NUL bytes and unpaired surrogates in any string param: 400 before a handler or a batch sees them.
      InputMiddleware,
      createChannelsMiddleware(settings, bus),
      HealthMiddleware(settings),
    ],
    metrics: metricsOptions(settings),
    // Stopping waits for running actions (in-flight HTTP requests included); index.ts handles signals.
    tracking: { enabled: true, shutdownTimeout: settings.shutdownTimeoutS * 1000 },
    skipProcessEventRegistration: true,
    tracing: { enabled: false },
  };
}

type Loader = () => ServiceSchema;

const SERVICES_DIR = path.join(__dirname, "services");

/**
 * The registry is derived from the folders: each `services/<name>/<name>.service.ts` (.js once
 * compiled) is the service SERVICES calls <name>; in name order.
 */
function discoverServices(): Record<string, Loader> {
  const registry: Record<string, Loader> = {};
  for (const name of fs.readdirSync(SERVICES_DIR).sort()) {
    const module = path.join(SERVICES_DIR, name, `${name}.service`);
    // A service's module is loaded only when SERVICES names it (or its REST base is asked for).
    if ([".ts", ".js"].some((ext) => fs.existsSync(module + ext))) registry[name] = () => require(module).default as ServiceSchema;
  }
  return registry;
}

/** Every service of the platform, by the name SERVICES uses. */
export const SERVICE_REGISTRY: Readonly<Record<string, Loader>> = discoverServices();

let restBases: readonly RestBase[] | undefined;

/** Which service owns which REST base, from every service's `settings.rest` (loads every service's module once). */
export function platformRestBases(): readonly RestBase[] {
  return (restBases ??= restBasesOf(Object.entries(SERVICE_REGISTRY).map(([name, load]) => [name, load()] as const)));
}

const allServices = () => Object.values(SERVICE_REGISTRY).map((load) => load());

/** Who may call each action of every platform service (loads every service's module). */
export function platformCallerTable(): CallerTableRow[] {
  return callerTable(allServices());
}

/** What the bus permissions are made of: every service's callers, events and channels (loads every service's module). */
export function platformBusTables(): BusTables {
  return busTables(allServices());
}

export function resolveServices(names: readonly string[]): ServiceSchema[] {
  const wanted = names.length ? names : Object.keys(SERVICE_REGISTRY);
  return wanted.map((name) => {
    const load = SERVICE_REGISTRY[name];
    if (!load) throw new Error(`Unknown service "${name}" in SERVICES (known: ${Object.keys(SERVICE_REGISTRY).join(", ")})`);
    return load();
  });
}

/**
 * A broker with no services yet, its platform settings parsed from `env` (a bad value throws
 * here, naming the variable) and `env` kept for its services to parse their own settings from.
 */
export function newBroker(services?: readonly string[], overrides: Partial<BrokerOptions> = {}, env: Env = process.env): ServiceBroker {
  const settings = parsePlatformSettings(env);
  const broker = new ServiceBroker({ ...brokerConfig(settings, services ?? settings.services), ...overrides });
  registerBrokerEnv(broker, env);
  rememberPlatformSettings(broker, settings);
  return broker;
}

/** `services`: default SERVICES from `env` (empty: all). Each service parses its own settings as it is created. */
export function createBroker(services?: readonly string[], overrides: Partial<BrokerOptions> = {}, env: Env = process.env): ServiceBroker {
  const broker = newBroker(services, overrides, env);
  for (const schema of resolveServices(services ?? platformSettingsOf(broker).services)) {
    // The gateway answers 503 for the REST paths of a service not running now: it is told whose they are.
    broker.createService(schema.name === "api-gateway" ? { ...schema, settings: { ...schema.settings, restBases: platformRestBases() } } : schema);
  }
  return broker;
}
