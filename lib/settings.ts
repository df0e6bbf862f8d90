/**
 * Typed readers over an environment record, for the settings each process and each service parse
 * once when they start (the platform's in lib/platform-settings.ts, each service's in its folder's
 * settings.ts; README "Configuration" lists them all). A bad value throws one error naming the
 * variable, the value and what is expected, so the process refuses to start instead of failing
 * a job later. Unset and empty mean the default.
 */
import type { ServiceBroker } from "moleculer";

/** The variables a broker was created with (process.env in production, a plain record in tests). */
export type Env = Readonly<Record<string, string | undefined>>;

export class SettingError extends Error {
  constructor(name: string, raw: string, expected: string) {
    super(`${name} must be ${expected}, got "${raw}"`);
    this.name = "SettingError";
  }
}

const given = (env: Env, name: string): string | undefined => {
  const raw = env[name];
  return raw === undefined || raw === "" ? undefined : raw;
};

/** Text, or `fallback` when unset or empty. */
export function text(env: Env, name: string): string | undefined;
export function text(env: Env, name: string, fallback: string): string;
export function text(env: Env, name: string, fallback?: string): string | undefined {
  return given(env, name) ?? fallback;
}

/** An integer. */
export function int(env: Env, name: string, fallback: number): number {
  const raw = given(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new SettingError(name, raw, "an integer");
  return value;
}

/** An integer of at least `min` (a count of slots, a queue length). */
export function intAtLeast(env: Env, name: string, fallback: number, min: number): number {
  const value = int(env, name, fallback);
  if (value < min) throw new SettingError(name, String(value), `an integer of at least ${min}`);
  return value;
}

/** An integer, or undefined when unset. */
export function optionalInt(env: Env, name: string): number | undefined {
  return given(env, name) === undefined ? undefined : int(env, name, 0);
}

/** A per-minute limit (INFERENCE_RPM, INFERENCE_TPM): a positive integer, or null when unset or "unlimited". */
export const perMinute = (env: Env, name: string): number | null => countLimit(env, name, null);

/** A limit on a count: a positive integer, or null for "unlimited"; `fallback` when unset. */
export function countLimit(env: Env, name: string, fallback: number | null): number | null {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return fallback;
  if (raw.toLowerCase() === "unlimited") return null;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new SettingError(name, raw, 'a positive integer or "unlimited"');
  return value;
}

/** A decimal number above 0 (limits such as CPUs, periods in seconds). */
export function positive(env: Env, name: string, fallback: number): number {
  const raw = given(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new SettingError(name, raw, "a positive number");
  return value;
}

/** A positive number, or undefined when unset. */
export function optionalPositive(env: Env, name: string): number | undefined {
  return given(env, name) === undefined ? undefined : positive(env, name, 1);
}

/** A TCP port (0: any free one), or null when the variable says "off". */
export function portOrOff(env: Env, name: string, fallback: number): number | null {
  if ((env[name] ?? "").trim().toLowerCase() === "off") return null;
  const port = int(env, name, fallback);
  if (port < 0 || port > 65535) throw new SettingError(name, String(port), 'a port number or "off"');
  return port;
}

/** NODE_ENV=production: stricter defaults and required secrets. */
export const isProductionEnv = (env: Env): boolean => env.NODE_ENV === "production";

/** On only when the variable is exactly "true". */
export const flag = (env: Env, name: string): boolean => env[name] === "true";

/** One of `values`, or undefined when unset or blank. */
export function oneOf<T extends string>(env: Env, name: string, values: readonly T[]): T | undefined {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return undefined;
  if (!(values as readonly string[]).includes(raw)) throw new SettingError(name, raw, values.map((v) => `"${v}"`).join(" or "));
  return raw as T;
}

/** A comma-separated list, trimmed, blanks dropped. */
export const list = (env: Env, name: string): string[] =>
  (env[name] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** An http(s) URL, trimmed; undefined when `raw` is undefined. */
export function httpUrl(name: string, raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (!/^https?:\/\/[^/]/.test(value)) throw new SettingError(name, raw, "an http(s) URL");
  return value;
}

/** The environment record each broker was created with (never in broker metadata: that goes out on the bus). */
const brokerEnvs = new WeakMap<ServiceBroker, Env>();

export function registerBrokerEnv(broker: ServiceBroker, env: Env): void {
  brokerEnvs.set(broker, env);
}

/** What a service parses its settings from: its broker's record; process.env for a broker made elsewhere. */
export const brokerEnv = (broker: ServiceBroker): Env => brokerEnvs.get(broker) ?? process.env;
