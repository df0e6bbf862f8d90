/**
 * The CLI's stored settings: $XDG_CONFIG_HOME/ci-platform/config.json (default ~/.config), mode
 * 0600 in a 0700 folder since it holds API keys and database connection strings. The file's own
 * fields are the `default` profile; others (`--profile NAME` or CI_PLATFORM_PROFILE, as the AWS and
 * Databricks CLIs) live under `profiles`. CI_PLATFORM_URL and CI_PLATFORM_API_KEY override the
 * profile's.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "fs";
import os from "os";
import path from "path";

export type Profile = {
  url?: string;
  apiKey?: string;
  /** Connection strings of databases this CLI created or rotated (shown once by the API): for `db psql`. */
  databases?: Record<string, string>;
  /** Their pooled connection strings (the platform's pooler, when it runs one): for `db psql --pooled`. */
  pooledDatabases?: Record<string, string>;
};

/** The default profile's fields, and the other profiles by name. */
export type Config = Profile & { profiles?: Record<string, Profile> };

export const DEFAULT_PROFILE = "default";
const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

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

/** The profile in use: `--profile`, else CI_PLATFORM_PROFILE, else `default`. */
export function profileName(given: string | undefined, env: Env = process.env): string {
  const name = given || env.CI_PLATFORM_PROFILE || DEFAULT_PROFILE;
  if (!PROFILE_NAME.test(name)) throw new Error(`Not a profile name: ${JSON.stringify(name)} (letters, digits, '.', '_', '-'; 64 at most)`);
  return name;
}

export function readProfile(name: string, env: Env = process.env): Profile {
  const { profiles, ...own } = readConfig(env);
  return name === DEFAULT_PROFILE ? own : (profiles?.[name] ?? {});
}

/** Changes one profile, the others kept as they are. */
export function updateProfile(name: string, change: (profile: Profile) => Profile, env: Env = process.env): string {
  return updateConfig(({ profiles, ...own }) => {
    if (name === DEFAULT_PROFILE) return { ...change(own), ...(profiles && { profiles }) };
    return { ...own, profiles: { ...profiles, [name]: change(profiles?.[name] ?? {}) } };
  }, env);
}

/** The URL and key to use: the environment's, else the profile's. */
export function resolveTarget(env: Env = process.env, profile = DEFAULT_PROFILE): { url?: string; apiKey?: string } {
  const stored = readProfile(profile, env);
  return { url: env.CI_PLATFORM_URL || stored.url, apiKey: env.CI_PLATFORM_API_KEY || stored.apiKey };
}
