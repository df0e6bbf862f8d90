/** What every command gets: the output streams, the target platform, and a client for it. */
import { CiPlatform } from "../../sdk/src";
import { Env, profileName, readProfile, resolveTarget, updateProfile } from "./config";
import { Out } from "./output";

export type GlobalArgs = { json: boolean; url?: string; profile?: string };

/** A mistake of the caller (missing login, bad value): its message, exit 2. */
export class UsageError extends Error {}

export type Context = Out & {
  env: Env;
  stdin: NodeJS.ReadStream;
  client(opts?: { anonymous?: boolean }): CiPlatform;
  url(): string;
  /** The stored settings' profile in use (config.ts). */
  profile: string;
  stored(): ReturnType<typeof readProfile>;
  store(change: Parameters<typeof updateProfile>[1]): string;
};

export function makeContext(args: GlobalArgs, env: Env = process.env): Context {
  let profile: string;
  try {
    profile = profileName(args.profile, env);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const login = profile === "default" ? "ci-platform login" : `ci-platform --profile ${profile} login`;
  const url = () => {
    const target = args.url || resolveTarget(env, profile).url;
    if (!target) throw new UsageError(`No platform URL: run \`${login} --url URL …\` or set CI_PLATFORM_URL`);
    if (!/^https?:\/\//.test(target)) throw new UsageError(`Not an http(s) URL: ${target}`);
    return target;
  };
  return {
    json: args.json,
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env,
    url,
    profile,
    stored: () => readProfile(profile, env),
    store: (change) => updateProfile(profile, change, env),
    client(opts = {}) {
      const baseUrl = url();
      if (opts.anonymous) return new CiPlatform({ baseUrl });
      const { apiKey } = resolveTarget(env, profile);
      if (!apiKey) throw new UsageError(`Not logged in: run \`${login}\` or set CI_PLATFORM_API_KEY`);
      return new CiPlatform({ baseUrl, token: apiKey });
    },
  };
}

/** All of stdin as text (a prompt, a password). */
export async function readStdin(stdin: NodeJS.ReadStream): Promise<string> {
  let text = "";
  stdin.setEncoding("utf8");
  for await (const chunk of stdin) text += chunk as string;
  return text;
}

/** Wraps a command's body: builds its context from the global options. */
export type Run = <A>(fn: (ctx: Context, args: A) => Promise<void>) => (args: A) => Promise<void>;
