/** The gateway's settings (README "Configuration"), parsed when it is created. */
import { parseJwtSecret } from "../../lib/jwt";
import { countLimit, Env, flag, int, intAtLeast, SettingError, text } from "../../lib/settings";
import { API_KEY_CACHE_MS } from "./caller-resolver";

export type GatewaySettings = {
  port: number;
  /** The address the HTTP server listens on. */
  host: string;
  /** Verifies access tokens (required in production). */
  jwtSecret: string;
  /** Trust X-Forwarded-For for the client address (behind an ingress). */
  trustProxy: boolean;
  /** Longest a request may wait for a service (above INFERENCE_TIMEOUT_MS). */
  timeoutMs: number;
  /** A client must send its whole request head within this long (slow-header attacks); 408 after. */
  headersTimeoutMs: number;
  /** A client must send its whole request (head and body) within this long; responses (SSE) are not limited. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this long. */
  keepAliveTimeoutMs: number;
  /** Open client connections at most; one more is answered 503 and closed. */
  maxConnections: number;
  /** Largest params (as JSON bytes) forwarded to a service; under NATS's default 1 MiB max_payload with room for the envelope. */
  maxParamsBytes: number;
  /** Open streams (logs, follows, events, artifacts, streamed inference) one account may hold on this replica; null: unlimited. */
  streamsPerAccount: number | null;
  /** How long auth's answer for an API key is trusted on this replica (0: asked on every request); at most 1 s, the revocation rule. */
  apiKeyCacheMs: number;
};

/** GATEWAY_API_KEY_CACHE_MS: 0 to 1000; more would let a rotated key live longer than the 1 s the platform promises. */
function apiKeyCacheMs(env: Env): number {
  const value = intAtLeast(env, "GATEWAY_API_KEY_CACHE_MS", 1000, 0);
  if (value > API_KEY_CACHE_MS) throw new SettingError("GATEWAY_API_KEY_CACHE_MS", String(value), `an integer from 0 to ${API_KEY_CACHE_MS}`);
  return value;
}

export const parseGatewaySettings = (env: Env): GatewaySettings => ({
  port: int(env, "PORT", 3000),
  host: text(env, "HOST", "0.0.0.0"),
  jwtSecret: parseJwtSecret(env),
  trustProxy: flag(env, "TRUST_PROXY"),
  timeoutMs: int(env, "GATEWAY_TIMEOUT_MS", 150_000),
  headersTimeoutMs: int(env, "GATEWAY_HEADERS_TIMEOUT_MS", 20_000),
  requestTimeoutMs: int(env, "GATEWAY_REQUEST_TIMEOUT_MS", 60_000),
  keepAliveTimeoutMs: int(env, "GATEWAY_KEEP_ALIVE_TIMEOUT_MS", 5_000),
  maxConnections: int(env, "GATEWAY_MAX_CONNECTIONS", 10_000),
  maxParamsBytes: int(env, "GATEWAY_MAX_PARAMS_BYTES", 960 * 1024),
  streamsPerAccount: countLimit(env, "GATEWAY_STREAMS_PER_ACCOUNT", 100),
  apiKeyCacheMs: apiKeyCacheMs(env),
});
