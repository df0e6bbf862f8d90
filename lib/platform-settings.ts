/**
 * The settings every process needs (bus, identity, state database, logging, probes, shutdown),
 * parsed once per broker from the environment record it was created with (README "Configuration").
 * Each service parses its own settings in its folder's settings.ts.
 */
import type { ServiceBroker } from "moleculer";
import { brokerEnv, Env, int, isProductionEnv, list, portOrOff, positive, text } from "./settings";

export const DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/ci_platform";

export type PlatformSettings = {
  production: boolean;
  /** Unset: the in-process bus; `nats://host:4222`: NATS. */
  transporter?: string;
  /** Moleculer node id; `<role>.<instance>` on an authenticated bus (a bare instance gets the role prefixed). */
  nodeId?: string;
  /** What this process runs (empty: every service). */
  services: string[];
  namespace: string;
  /** NATS for channels when not the transporter's. */
  channelsUrl?: string;
  /** NATS credentials of this process (else taken from the TRANSPORTER / CHANNELS_URL URL). */
  natsUser?: string;
  natsPassword?: string;
  /** A file holding NATS_PASSWORD (Kubernetes: one key of a mounted Secret, e.g. per GPU host). */
  natsPasswordFile?: string;
  /** TLS to NATS, each a PEM file path or the PEM text itself. */
  natsTlsCa?: string;
  natsTlsCert?: string;
  natsTlsKey?: string;
  /** gpu-node: the node's name on the bus (node id `gpu-node.<name>`), the one its NATS credential was made for. */
  gpuNodeName?: string;
  databaseUrl: string;
  redisUrl?: string;
  /** Gateway: Ed25519 key signing caller tokens, base64 32-byte seed or PEM (lib/caller-token.ts). */
  callerSigningKey?: string;
  /** Every service: the public key checking caller tokens; default: CALLER_SIGNING_KEY's. */
  callerVerifyKey?: string;
  logLevel: string;
  logFormat: string;
  /** HOST: the address the health and metrics servers bind as well as the gateway (unset: every interface). */
  listenHost?: string;
  /** Liveness/readiness HTTP port (0: any free port; null: none). */
  healthPort: number | null;
  /** Prometheus endpoint, path /metrics (0: any free port; null: metrics disabled). */
  metricsPort: number | null;
  /** A readiness check answering slower than this counts as failed. */
  readyCheckTimeoutMs: number;
  /** After SIGTERM: seconds of "not ready" before draining starts, so load balancers stop sending. */
  shutdownDelayS: number;
  /** After SIGTERM: in-flight work gets this long to finish before the process exits anyway. */
  shutdownTimeoutS: number;
  /** QUOTA_CACHE_MS: how long an enforcing replica trusts an account's quota standing (lib/quota-gate.ts). */
  quotaCacheMs: number;
};

export function parsePlatformSettings(env: Env): PlatformSettings {
  const production = isProductionEnv(env);
  return {
    production,
    transporter: text(env, "TRANSPORTER"),
    nodeId: text(env, "NODE_ID"),
    services: list(env, "SERVICES"),
    namespace: text(env, "NAMESPACE", ""),
    channelsUrl: text(env, "CHANNELS_URL"),
    natsUser: text(env, "NATS_USER"),
    natsPassword: text(env, "NATS_PASSWORD"),
    natsPasswordFile: text(env, "NATS_PASSWORD_FILE"),
    natsTlsCa: text(env, "NATS_TLS_CA"),
    natsTlsCert: text(env, "NATS_TLS_CERT"),
    natsTlsKey: text(env, "NATS_TLS_KEY"),
    gpuNodeName: text(env, "GPU_NODE_NAME"),
    databaseUrl: text(env, "DATABASE_URL", DEFAULT_DATABASE_URL),
    redisUrl: text(env, "REDIS_URL"),
    callerSigningKey: env.CALLER_SIGNING_KEY?.trim() || undefined,
    callerVerifyKey: env.CALLER_VERIFY_KEY?.trim() || undefined,
    logLevel: text(env, "LOG_LEVEL", "info"),
    logFormat: text(env, "LOG_FORMAT", production ? "json" : "short"),
    listenHost: text(env, "HOST"),
    healthPort: portOrOff(env, "HEALTH_PORT", followingPort(env, 1)),
    metricsPort: portOrOff(env, "METRICS_PORT", followingPort(env, 30)),
    readyCheckTimeoutMs: int(env, "READY_CHECK_TIMEOUT_MS", 2000),
    shutdownDelayS: int(env, "SHUTDOWN_DELAY_S", 0),
    shutdownTimeoutS: positive(env, "SHUTDOWN_TIMEOUT_S", 30),
    quotaCacheMs: int(env, "QUOTA_CACHE_MS", 2000),
  };
}

/**
 * HEALTH_PORT and METRICS_PORT when unset follow PORT (PORT+1 and PORT+30: 3001 and 3030 for the
 * default 3000), so PORT alone moves a whole quick start; PORT=0 gives any free ones.
 */
function followingPort(env: Env, offset: number): number {
  const port = int(env, "PORT", 3000);
  return port === 0 || port + offset > 65535 ? 0 : port + offset;
}

const parsed = new WeakMap<ServiceBroker, PlatformSettings>();

/** Kept by the composition root when it creates a broker, so services and middlewares see the same parse. */
export function rememberPlatformSettings(broker: ServiceBroker, settings: PlatformSettings): void {
  parsed.set(broker, settings);
}

/** The platform settings of `broker` (parsed from its environment record the first time when not remembered). */
export function platformSettingsOf(broker: ServiceBroker): PlatformSettings {
  let settings = parsed.get(broker);
  if (!settings) parsed.set(broker, (settings = parsePlatformSettings(brokerEnv(broker))));
  return settings;
}
