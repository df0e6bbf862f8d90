/**
 * Every environment variable the platform reads, in one place (see README "Configuration").
 * Read lazily so tests can set process.env before a broker starts.
 */
import os from "os";
import path from "path";

const DEV_JWT_SECRET = "ci-platform-development-secret-change-me";

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return value;
}

export type OpenAiProviderConfig = { name: string; url: string; apiKey?: string };

const PROVIDER_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

/** OPENAI_PROVIDERS='[{"name":"vllm","url":"http://127.0.0.1:8000","apiKey":"…"}]'; names are lowercased. */
export function parseOpenAiProviders(raw: string | undefined): OpenAiProviderConfig[] {
  if (raw === undefined || raw.trim() === "") return [];
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    throw new Error("OPENAI_PROVIDERS must be a JSON list of {name, url, apiKey?}");
  }
  if (!Array.isArray(list)) throw new Error("OPENAI_PROVIDERS must be a JSON list of {name, url, apiKey?}");
  return list.map((entry: { name?: unknown; url?: unknown; apiKey?: unknown }, i) => {
    const name = typeof entry?.name === "string" ? entry.name.trim().toLowerCase() : "";
    if (!PROVIDER_NAME.test(name)) throw new Error(`OPENAI_PROVIDERS[${i}].name must match ${PROVIDER_NAME}`);
    const url = typeof entry.url === "string" ? entry.url.trim() : "";
    if (!/^https?:\/\/[^/]/.test(url)) throw new Error(`OPENAI_PROVIDERS[${i}].url must be an http(s) URL`);
    if (entry.apiKey !== undefined && typeof entry.apiKey !== "string") throw new Error(`OPENAI_PROVIDERS[${i}].apiKey must be a string`);
    return { name, url, ...(entry.apiKey ? { apiKey: entry.apiKey } : {}) };
  });
}

/**
 * dbaas catalog levels (services/dbaas/tenant-sql.ts hiddenAt): `sessions` hides other tenants'
 * sessions and activity, `all` also the names of databases and roles (pg_dump and psql's \l then
 * fail), `off` nothing.
 */
export const CATALOG_LEVELS = ["off", "sessions", "all"] as const;
export type CatalogLevel = (typeof CATALOG_LEVELS)[number];

/** DBAAS_HIDE_CATALOG: a level, `true` (the former default: `all`) or `false` (`off`); unset or empty: `sessions`. */
export function parseCatalogLevel(raw: string | undefined): CatalogLevel {
  const value = (raw ?? "").trim().toLowerCase();
  if (value === "") return "sessions";
  if (value === "true") return "all";
  if (value === "false") return "off";
  if ((CATALOG_LEVELS as readonly string[]).includes(value)) return value as CatalogLevel;
  throw new Error(`DBAAS_HIDE_CATALOG must be "sessions" (the default), "all" (or "true") or "off" (or "false"), got "${raw}"`);
}

/** A decimal number (for limits such as CPUs or heartbeat seconds). */
function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

/** A TCP port, or null when the variable says "off". */
function portOrOff(name: string, fallback: number): number | null {
  if ((process.env[name] ?? "").trim().toLowerCase() === "off") return null;
  const port = int(name, fallback);
  if (port < 0 || port > 65535) throw new Error(`${name} must be a port number or "off", got "${port}"`);
  return port;
}

export const isProduction = (): boolean => process.env.NODE_ENV === "production";

export const config = {
  port: () => int("PORT", 3000),
  transporter: () => process.env.TRANSPORTER || undefined,
  /** Moleculer node id; `<role>.<instance>` on an authenticated bus (a bare instance gets the role prefixed). */
  nodeId: () => process.env.NODE_ID || undefined,
  /** NATS credentials of this process (else taken from the TRANSPORTER / CHANNELS_URL URL). */
  natsUser: () => process.env.NATS_USER || undefined,
  natsPassword: () => process.env.NATS_PASSWORD || undefined,
  /** A file holding NATS_PASSWORD (Kubernetes: one key of a mounted Secret, e.g. per GPU host). */
  natsPasswordFile: () => process.env.NATS_PASSWORD_FILE || undefined,
  /** TLS to NATS, each a PEM file path or the PEM text itself: the CA that signed the server's certificate, and an optional client certificate and key. */
  natsTlsCa: () => process.env.NATS_TLS_CA || undefined,
  natsTlsCert: () => process.env.NATS_TLS_CERT || undefined,
  natsTlsKey: () => process.env.NATS_TLS_KEY || undefined,
  /** gpu-node: the node's name on the bus (node id `gpu-node.<name>`), the one its NATS credential was made for. */
  gpuNodeName: () => process.env.GPU_NODE_NAME || undefined,
  namespace: () => process.env.NAMESPACE || "",
  services: () =>
    (process.env.SERVICES || "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  databaseUrl: () => process.env.DATABASE_URL || "postgresql://postgres@127.0.0.1:5432/ci_platform",
  redisUrl: () => process.env.REDIS_URL || undefined,
  jwtSecret: (): string => {
    const secret = process.env.JWT_SECRET;
    if (secret) return secret;
    if (isProduction()) throw new Error("JWT_SECRET is required when NODE_ENV=production");
    return DEV_JWT_SECRET;
  },
  /** Gateway: Ed25519 key signing caller tokens, base64 32-byte seed or PEM (lib/caller-token.ts). */
  callerSigningKey: () => process.env.CALLER_SIGNING_KEY?.trim() || undefined,
  /** Every service: Ed25519 public key checking caller tokens, base64 32 bytes or PEM; default: CALLER_SIGNING_KEY's. */
  callerVerifyKey: () => process.env.CALLER_VERIFY_KEY?.trim() || undefined,
  /** scrypt cost (N = 2^17 is OWASP's recommendation with r=8, p=1). */
  scryptLogN: () => int("SCRYPT_LOG_N", 17),
  /** Register/login attempts allowed per window, per client address and per e-mail. */
  authRateLimitPerIp: () => int("AUTH_RATE_LIMIT_PER_IP", 60),
  authRateLimitPerEmail: () => int("AUTH_RATE_LIMIT_PER_EMAIL", 10),
  authRateWindowS: () => int("AUTH_RATE_WINDOW_S", 60),
  /** Ollama's base URL; empty or "off" configures no Ollama provider. */
  ollamaUrl: (): string | undefined => {
    const raw = process.env.OLLAMA_URL;
    if (raw === undefined) return "http://127.0.0.1:11434";
    return raw.trim() === "" || raw.trim().toLowerCase() === "off" ? undefined : raw.trim();
  },
  /** OpenAI-compatible providers: a JSON list of { name, url, apiKey? } (README "Inference"). */
  openaiProviders: (): OpenAiProviderConfig[] => parseOpenAiProviders(process.env.OPENAI_PROVIDERS),
  /** No answer from a provider within this long is 504 (streams: no chunk within it). */
  inferenceTimeoutMs: () => int("INFERENCE_TIMEOUT_MS", 120_000),
  /** How long the merged model list is cached (a list missing a provider: at most 5 s). */
  modelsCacheS: () => int("MODELS_CACHE_S", 30),
  /** gpu-node: `docker` or `process` (sandboxed); unset means docker, or process outside production when no engine answers. */
  gpuExecutor: (): "docker" | "process" | undefined => {
    const raw = (process.env.GPU_EXECUTOR || "").trim();
    if (raw === "") return undefined;
    if (raw !== "docker" && raw !== "process") throw new Error(`GPU_EXECUTOR must be "docker" or "process", got "${raw}"`);
    return raw;
  },
  /** gpu-node: cards to report when the host has none, `name:memoryMiB,…` (services/gpu-node/discovery.ts). */
  gpuSimulate: () => process.env.GPU_SIMULATE || undefined,
  gpuDefaultImage: () => process.env.GPU_DEFAULT_IMAGE || "nvidia/cuda:12.4.1-base-ubuntu22.04",
  /** A job running longer than this is stopped and failed. */
  jobTimeoutS: () => num("JOB_TIMEOUT_S", 3600),
  gpuHeartbeatS: () => num("GPU_HEARTBEAT_S", 2),
  gpuTelemetryS: () => num("GPU_TELEMETRY_S", 5),
  /** Limits of a job container (CPUs are capped at what the engine has). */
  gpuJobMemoryMb: (): number | undefined => (process.env.GPU_JOB_MEMORY_MB ? int("GPU_JOB_MEMORY_MB", 0) : undefined),
  /** Unset: host CPUs / cards (services/gpu-node/resources.ts). */
  gpuJobCpus: (): number | undefined => (process.env.GPU_JOB_CPUS ? num("GPU_JOB_CPUS", 1) : undefined),
  /** gpu-node: start even when cards × GPU_JOB_MEMORY_MB or × GPU_JOB_CPUS exceed the host. */
  gpuAllowOvercommit: () => process.env.GPU_ALLOW_OVERCOMMIT === "true",
  /** gpu-node and gpu-scheduler: registries job images may come from, comma list of host[:port] (parsed by services/gpu-node/registry-policy.ts). */
  gpuAllowedRegistries: () => process.env.GPU_ALLOWED_REGISTRIES,
  /** gpu-node: process jobs run WITHOUT the bubblewrap sandbox, as the node's own user (never on a shared host). */
  gpuUnsafeUnisolatedJobs: () => process.env.GPU_UNSAFE_UNISOLATED_JOBS === "true",
  /** gpu-node: uid and gid sandboxed process jobs run as (when the node runs as root). */
  gpuJobUid: () => int("GPU_JOB_UID", 65534),
  gpuJobGid: () => int("GPU_JOB_GID", 65534),
  gpuJobPids: () => int("GPU_JOB_PIDS", 1024),
  /** Docker network of job containers; `none` keeps untrusted code off every network. */
  gpuJobNetwork: () => process.env.GPU_JOB_NETWORK || "none",
  /** Seconds between SIGTERM and SIGKILL when a job is cancelled or times out. */
  gpuStopGraceS: () => num("GPU_STOP_GRACE_S", 10),
  /** Where a node keeps each job's whole output (`<jobId>.log`). */
  gpuJobLogDir: () => process.env.GPU_JOB_LOG_DIR || path.join(os.tmpdir(), "ci-platform-jobs"),
  /** gpu-node: a job's log file stops at this many MiB (a note says how much was cut; the result keeps the true tail). */
  gpuJobOutputMaxMb: () => num("GPU_JOB_OUTPUT_MAX_MB", 64),
  /** gpu-node: all job logs on the node together stay under this many MiB (oldest finished jobs' logs go first). */
  gpuJobLogMaxTotalMb: () => num("GPU_JOB_LOG_MAX_TOTAL_MB", 2048),
  /** gpu-scheduler: a gpu-node silent this long has left the cluster (its running jobs fail). */
  gpuNodeTimeoutS: () => num("GPU_NODE_TIMEOUT_S", 10),
  /** gpu-scheduler: safety tick (placement, node loss, stale placements), in milliseconds. */
  gpuScheduleTickMs: () => int("GPU_SCHEDULE_TICK_MS", 1000),
  /** gpu-scheduler: how long a `gpu-node.run`/`cancel` call may take before the placement is retried. */
  gpuDispatchTimeoutS: () => num("GPU_DISPATCH_TIMEOUT_S", 10),
  /** dbaas: superuser URL of the server hosting client databases; no default: never the state server by accident. */
  dbaasAdminUrl: (): string | undefined => process.env.DBAAS_ADMIN_URL || undefined,
  /** dbaas: explicit opt-in to host client databases on the platform's own state server (passwords still checked). */
  dbaasAllowStateServer: () => process.env.DBAAS_ALLOW_STATE_SERVER === "true",
  /** dbaas: tenant connections of one account, shared out over its databases' roles. */
  dbaasConnectionsPerAccount: () => int("DBAAS_CONNECTIONS_PER_ACCOUNT", 20),
  /** dbaas: tenant-server connections kept free for the platform, beyond superuser_reserved_connections. */
  dbaasReservedConnections: () => int("DBAAS_RESERVED_CONNECTIONS", 20),
  /** dbaas: how often a database above 80 % of its quota is measured (seconds). */
  dbaasQuotaNearCheckS: () => num("DBAAS_QUOTA_NEAR_CHECK_S", 1),
  /** dbaas: what of the catalog tenants cannot read (parseCatalogLevel; default `sessions`). */
  dbaasHideCatalog: (): CatalogLevel => parseCatalogLevel(process.env.DBAAS_HIDE_CATALOG),
  /** dbaas: host and port written into connection strings (what clients reach the server by). */
  dbaasPublicHost: () => process.env.DBAAS_PUBLIC_HOST || "localhost",
  dbaasPublicPort: () => int("DBAAS_PUBLIC_PORT", 5432),
  dbaasMaxPerAccount: () => int("DBAAS_MAX_PER_ACCOUNT", 5),
  dbaasMaxStorageMb: () => int("DBAAS_MAX_STORAGE_MB", 1024),
  /** dbaas: most connections of one client database's role (the account's share may be lower). */
  dbaasConnectionLimit: () => int("DBAAS_CONNECTION_LIMIT", 20),
  dbaasQuotaCheckS: () => num("DBAAS_QUOTA_CHECK_S", 30),
  dbaasReconcileS: () => num("DBAAS_RECONCILE_S", 60),
  /** dbaas: CREATE DATABASE statements running at once on the tenant server (across replicas). */
  dbaasCreateConcurrency: () => int("DBAAS_CREATE_CONCURRENCY", 2),
  /** Trust X-Forwarded-For for the client address (behind an ingress). */
  trustProxy: () => process.env.TRUST_PROXY === "true",
  /** Longest a gateway request may wait for a service (above INFERENCE_TIMEOUT_MS). */
  gatewayTimeoutMs: () => int("GATEWAY_TIMEOUT_MS", 150_000),
  /** Gateway: a client must send its whole request head within this long (slow-header attacks); 408 after. */
  gatewayHeadersTimeoutMs: () => int("GATEWAY_HEADERS_TIMEOUT_MS", 20_000),
  /** Gateway: a client must send its whole request (head and body) within this long; responses (SSE) are not limited. */
  gatewayRequestTimeoutMs: () => int("GATEWAY_REQUEST_TIMEOUT_MS", 60_000),
  /** Gateway: an idle keep-alive connection is closed after this long. */
  gatewayKeepAliveTimeoutMs: () => int("GATEWAY_KEEP_ALIVE_TIMEOUT_MS", 5_000),
  /** Gateway: open client connections at most; one more is answered 503 and closed. */
  gatewayMaxConnections: () => int("GATEWAY_MAX_CONNECTIONS", 10_000),
  /** Gateway: largest params (as JSON bytes) forwarded to a service; under NATS's default 1 MiB max_payload with room for the envelope. */
  gatewayMaxParamsBytes: () => int("GATEWAY_MAX_PARAMS_BYTES", 960 * 1024),
  /** Key of the opaque node labels clients see instead of node ids (default: derived from DATABASE_URL, which every scheduler replica shares). */
  nodeLabelSecret: () => process.env.NODE_LABEL_SECRET || `node-label:${config.databaseUrl()}`,
  logLevel: () => process.env.LOG_LEVEL || "info",
  logFormat: () => process.env.LOG_FORMAT || (isProduction() ? "json" : "short"),
  /** Liveness/readiness HTTP port of every process (0: any free port; "off": none). */
  healthPort: () => portOrOff("HEALTH_PORT", 3001),
  /** Prometheus endpoint of every process, path /metrics (0: any free port; "off": metrics disabled). */
  metricsPort: () => portOrOff("METRICS_PORT", 3030),
  /** How often the metrics service asks the other services for their figures. */
  metricsCollectIntervalS: () => num("METRICS_COLLECT_INTERVAL_S", 15),
  /** A readiness check answering slower than this counts as failed. */
  readyCheckTimeoutMs: () => int("READY_CHECK_TIMEOUT_MS", 2000),
  /** After SIGTERM: seconds of "not ready" before draining starts, so load balancers stop sending. */
  shutdownDelayS: () => int("SHUTDOWN_DELAY_S", 0),
  /** After SIGTERM: in-flight work gets this long to finish before the process exits anyway. */
  shutdownTimeoutS: () => num("SHUTDOWN_TIMEOUT_S", 30),
};
