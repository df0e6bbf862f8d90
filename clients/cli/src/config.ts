/**
 * The CLI's stored settings: $XDG_CONFIG_HOME/ci-platform/config.json (default ~/.config), mode
 * 0600 in a 0700 folder since it holds an API key and database connection strings.
 * CI_PLATFORM_URL and CI_PLATFORM_API_KEY override what the file says.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "fs";
import os from "os";
import path from "path";

export type Config = {
  url?: string;
  apiKey?: string;
  /** Connection strings of databases this CLI created or rotated (shown once by the API): for `db psql`. */
  databases?: Record<string, string>;
};

export type Env = Record<string, string | undefined>;

export function configFile(env: Env = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), ".config");
  return path.join(base, "ci-platform", "config.json");
}

export function readConfig(env: Env = process.env): Config {
  const file = configFile(env);
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Config;
  } catch {
    throw new Error(`${file} is not valid JSON: fix or remove it, then log in again`);
  }
}

export function writeConfig(config: Config, env: Env = process.env): string {
  const file = configFile(env);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, JSON.stringify(config, null, 2) + "\n", { mode: 0o600 });
  // writeFileSync keeps an existing file's mode: make sure it is 0600 whatever it was.
  chmodSync(file, 0o600);
  return file;
}

export function updateConfig(change: (config: Config) => Config, env: Env = process.env): string {
  return writeConfig(change(readConfig(env)), env);
}

/** The URL and key to use: the environment's, else the file's. */
export function resolveTarget(env: Env = process.env): { url?: string; apiKey?: string } {
  const file = readConfig(env);
  return { url: env.CI_PLATFORM_URL || file.url, apiKey: env.CI_PLATFORM_API_KEY || file.apiKey };
}
