/**
 * Settings are parsed once, when a broker and its services are created: a bad value refuses the
 * start there, with a message naming the variable, the value and what is expected. No server:
 * the broker is created, never started.
 */
import { createBroker } from "../../moleculer.config";
import { parseGatewaySettings } from "../../services/api-gateway/settings";
import { parseGpuNodeSettings } from "../../services/gpu-node/settings";
import { testEnv } from "../support/platform";

// No health or metrics server: a broker whose creation fails is never stopped.
const env = (vars: Record<string, string | undefined>) => testEnv({ HEALTH_PORT: "off", METRICS_PORT: "off", LOG_LEVEL: "fatal", ...vars });

describe("settings - a bad value refuses the start, naming the variable", () => {
  it.each<[string, string[], Record<string, string | undefined>, RegExp]>([
    ["platform HEALTH_PORT", [], { HEALTH_PORT: "70000" }, /^HEALTH_PORT must be a port number or "off", got "70000"$/],
    ["platform SHUTDOWN_TIMEOUT_S", [], { SHUTDOWN_TIMEOUT_S: "soon" }, /^SHUTDOWN_TIMEOUT_S must be a positive number, got "soon"$/],
    ["dbaas DBAAS_RESERVED_CONNECTIONS", ["dbaas"], { DBAAS_RESERVED_CONNECTIONS: "lots" }, /^DBAAS_RESERVED_CONNECTIONS must be an integer, got "lots"$/],
    [
      "dbaas DBAAS_HIDE_CATALOG",
      ["dbaas"],
      { DBAAS_HIDE_CATALOG: "yes" },
      /^DBAAS_HIDE_CATALOG must be "sessions" \(the default\), "all" \(or "true"\) or "off" \(or "false"\), got "yes"$/,
    ],
    ["dbaas DBAAS_QUOTA_CHECK_S", ["dbaas"], { DBAAS_QUOTA_CHECK_S: "0" }, /^DBAAS_QUOTA_CHECK_S must be a positive number, got "0"$/],
    ["gpu-node GPU_EXECUTOR", ["gpu-node"], { GPU_EXECUTOR: "vm" }, /^GPU_EXECUTOR must be "docker" or "process", got "vm"$/],
    ["gpu-node GPU_JOB_CPUS", ["gpu-node"], { GPU_JOB_CPUS: "-1" }, /^GPU_JOB_CPUS must be a positive number, got "-1"$/],
    ["gpu-node GPU_SERVE_LISTEN", ["gpu-node"], { GPU_SERVE_LISTEN: "7070" }, /^GPU_SERVE_LISTEN must be host:port, got "7070"$/],
    ["gpu-node GPU_SERVE_LISTEN port", ["gpu-node"], { GPU_SERVE_LISTEN: "127.0.0.1:70000" }, /^GPU_SERVE_LISTEN must be host:port, got "127.0.0.1:70000"$/],
    [
      "gpu-node GPU_SERVE_LISTEN on every address, no GPU_SERVE_ADDRESS",
      ["gpu-node"],
      { GPU_SERVE_LISTEN: "0.0.0.0:7070" },
      /^GPU_SERVE_ADDRESS must be the host inference connects to when GPU_SERVE_LISTEN listens on every address, got ""$/,
    ],
    ["gpu-scheduler GPU_SCHEDULE_TICK_MS", ["gpu-scheduler"], { GPU_SCHEDULE_TICK_MS: "1.5" }, /^GPU_SCHEDULE_TICK_MS must be an integer, got "1.5"$/],
    ["inference OPENAI_PROVIDERS", ["inference"], { OPENAI_PROVIDERS: "{}" }, /^OPENAI_PROVIDERS must be a JSON list of \{name, url, apiKey\?\}$/],
    ["inference OLLAMA_URL", ["inference"], { OLLAMA_URL: "localhost:11434" }, /^OLLAMA_URL must be an http\(s\) URL, got "localhost:11434"$/],
    ["auth SCRYPT_LOG_N", ["auth"], { SCRYPT_LOG_N: "high" }, /^SCRYPT_LOG_N must be an integer, got "high"$/],
    ["auth AUTH_HASH_CONCURRENCY", ["auth"], { AUTH_HASH_CONCURRENCY: "0" }, /^AUTH_HASH_CONCURRENCY must be an integer of at least 1, got "0"$/],
    ["auth AUTH_HASH_QUEUE", ["auth"], { AUTH_HASH_QUEUE: "-1" }, /^AUTH_HASH_QUEUE must be an integer of at least 0, got "-1"$/],
    ["auth JWT_SECRET in production", ["auth"], { NODE_ENV: "production", JWT_SECRET: undefined }, /^JWT_SECRET is required when NODE_ENV=production$/],
    ["api-gateway GATEWAY_TIMEOUT_MS", ["api-gateway"], { GATEWAY_TIMEOUT_MS: "150s" }, /^GATEWAY_TIMEOUT_MS must be an integer, got "150s"$/],
    [
      "api-gateway GATEWAY_STREAMS_PER_ACCOUNT",
      ["api-gateway"],
      { GATEWAY_STREAMS_PER_ACCOUNT: "0" },
      /^GATEWAY_STREAMS_PER_ACCOUNT must be a positive integer or "unlimited", got "0"$/,
    ],
    [
      "metrics METRICS_COLLECT_INTERVAL_S",
      ["metrics"],
      { METRICS_COLLECT_INTERVAL_S: "-5" },
      /^METRICS_COLLECT_INTERVAL_S must be a positive number, got "-5"$/,
    ],
  ])("settings - %s", (_name, services, vars, message) => {
    expect(() => createBroker(services, {}, env(vars))).toThrow(message);
  });

  it("settings - a service reads its broker's record, not process.env", () => {
    expect(process.env.GATEWAY_MAX_PARAMS_BYTES).toBeUndefined();
    expect(parseGatewaySettings(env({ GATEWAY_MAX_PARAMS_BYTES: "1024", HOST: "127.0.0.1" }))).toMatchObject({ maxParamsBytes: 1024, host: "127.0.0.1" });
    const broker = createBroker(["api-gateway"], {}, env({ GATEWAY_MAX_PARAMS_BYTES: "1024", HOST: "127.0.0.1" }));
    const gateway = broker.getLocalService("api-gateway") as unknown as { config: { maxParamsBytes: number }; settings: { ip: string } };
    expect([gateway.config.maxParamsBytes, gateway.settings.ip]).toEqual([1024, "127.0.0.1"]);
  });

  it("settings - GATEWAY_STREAMS_PER_ACCOUNT: 100 by default, a number, or unlimited", () => {
    expect(parseGatewaySettings(env({})).streamsPerAccount).toBe(100);
    expect(parseGatewaySettings(env({ GATEWAY_STREAMS_PER_ACCOUNT: " 7 " })).streamsPerAccount).toBe(7);
    expect(parseGatewaySettings(env({ GATEWAY_STREAMS_PER_ACCOUNT: "Unlimited" })).streamsPerAccount).toBeNull();
  });

  it("settings - unset and empty mean the documented defaults", () => {
    expect(parseGpuNodeSettings({ GPU_JOB_MEMORY_MB: "", GPU_HEARTBEAT_S: "" })).toMatchObject({
      jobMemoryMb: undefined,
      heartbeatS: 2,
      jobTimeoutS: 3600,
      jobNetwork: "none",
      defaultImage: "nvidia/cuda:12.4.1-base-ubuntu22.04",
      serveListen: undefined,
    });
    expect(parseGpuNodeSettings({ GPU_SERVE_LISTEN: "[::1]:0" })).toMatchObject({ serveListen: { host: "::1", port: 0 }, serveAddress: undefined });
    expect(parseGpuNodeSettings({ GPU_SERVE_LISTEN: "0.0.0.0:7070", GPU_SERVE_ADDRESS: "10.1.2.3" })).toMatchObject({
      serveListen: { host: "0.0.0.0", port: 7070 },
      serveAddress: "10.1.2.3",
    });
  });
});
