/** login, register, whoami, logout, keys create: each ends with an API key stored for the next commands; `signedIn` for what needs a JWT. */
import type { Argv } from "yargs";
import type { CiPlatform } from "../../sdk/src";
import { Context, readStdin, Run, UsageError } from "./context";

type Password = { password?: string; "password-stdin"?: boolean };

export async function password(ctx: Context, args: Password): Promise<string> {
  if (args["password-stdin"]) return (await readStdin(ctx.stdin)).replace(/\r?\n$/, "");
  if (args.password) return args.password;
  throw new UsageError("A password is needed: --password-stdin (preferred: not in the process list) or --password");
}

export const passwordOptions = <T>(y: Argv<T>) =>
  y
    .option("email", { type: "string", describe: "the account's e-mail" })
    .option("password", { type: "string", describe: "the password (visible to other local users in the process list)" })
    .option("password-stdin", { type: "boolean", describe: "read the password from stdin" });

/** A client signed in with the account's password (a JWT): what minting credentials needs. */
export async function signedIn(ctx: Context, args: Password & { email: string }): Promise<CiPlatform> {
  const sdk = ctx.client({ anonymous: true });
  const { accessToken } = await sdk.login({ email: args.email, password: await password(ctx, args) });
  return sdk.withToken(accessToken);
}

function save(ctx: Context, apiKey: string): string {
  return ctx.store((c) => ({ ...c, url: ctx.url(), apiKey }));
}

function report(ctx: Context, file: string, email: string): void {
  if (ctx.json) ctx.stdout.write(JSON.stringify({ url: ctx.url(), email, config: file }) + "\n");
  else ctx.stderr.write(`Logged in to ${ctx.url()} as ${email}; API key saved in ${file}\n`);
}

export function accountCommands(y: Argv, run: Run): Argv {
  return y
    .command(
      "login",
      "store the platform URL and an API key (--api-key KEY, or --email with a password: a new key, which replaces the account's previous one)",
      (c) => passwordOptions(c).option("api-key", { type: "string", describe: "an existing API key (ci_…)" }),
      run(async (ctx, args) => {
        if (args.apiKey) {
          const me = await ctx.client({ anonymous: true }).withToken(args.apiKey).me();
          return report(ctx, save(ctx, args.apiKey), me.email);
        }
        if (!args.email) throw new UsageError("login needs --api-key KEY, or --email with --password-stdin");
        const sdk = ctx.client({ anonymous: true });
        const { accessToken, client } = await sdk.login({ email: args.email, password: await password(ctx, args) });
        const { apiKey } = await sdk.withToken(accessToken).createApiKey();
        report(ctx, save(ctx, apiKey), client.email);
      }),
    )
    .command(
      "register",
      "create an account, then log in with a new API key",
      (c) => passwordOptions(c).option("name", { type: "string", describe: "your name" }).demandOption(["email"]),
      run(async (ctx, args) => {
        const sdk = ctx.client({ anonymous: true });
        const { accessToken, client } = await sdk.register({ email: args.email, name: args.name ?? args.email, password: await password(ctx, args) });
        const { apiKey } = await sdk.withToken(accessToken).createApiKey();
        report(ctx, save(ctx, apiKey), client.email);
      }),
    )
    .command(
      "whoami",
      "the account the stored key (or CI_PLATFORM_API_KEY) belongs to, on which URL and profile",
      (c) => c,
      run(async (ctx) => {
        const me = await ctx.client().me();
        const who = { email: me.email, name: me.name, url: ctx.url(), profile: ctx.profile };
        if (ctx.json) ctx.stdout.write(JSON.stringify(who) + "\n");
        else ctx.stdout.write(`${me.email} (${me.name}) on ${who.url}${ctx.profile === "default" ? "" : `, profile ${ctx.profile}`}\n`);
      }),
    )
    .command(
      "logout",
      "forget the stored API key of this profile (the key itself keeps working until a new one replaces it)",
      (c) => c,
      run(async (ctx) => {
        const had = Boolean(ctx.stored().apiKey);
        const file = ctx.store(({ apiKey: _key, ...rest }) => rest);
        if (ctx.json) ctx.stdout.write(JSON.stringify({ profile: ctx.profile, removed: had, config: file }) + "\n");
        else ctx.stderr.write(had ? `Logged out (profile ${ctx.profile}): the API key was removed from ${file}\n` : `Not logged in (profile ${ctx.profile})\n`);
      }),
    )
    .command("keys", "API keys", (k) =>
      k
        .command(
          "create",
          "create an API key (shown once; replaces the previous one); --save stores it",
          (c) => passwordOptions(c).option("save", { type: "boolean", describe: "store it as this CLI's key" }).demandOption(["email"]),
          run(async (ctx, args) => {
            const { apiKey } = await (await signedIn(ctx, args)).createApiKey();
            if (args.save) save(ctx, apiKey);
            if (ctx.json) ctx.stdout.write(JSON.stringify({ apiKey }) + "\n");
            else ctx.stdout.write(`${apiKey}\n`);
            ctx.stderr.write("Shown once: keep it safe. The account's previous key no longer works.\n");
          }),
        )
        .demandCommand(1),
    );
}
