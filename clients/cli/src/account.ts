/** login, register, keys create: each ends with an API key stored for the next commands; `signedIn` for what needs a JWT. */
import type { Argv } from "yargs";
import type { CiPlatform } from "../../sdk/src";
import { updateConfig } from "./config";
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
  return updateConfig((c) => ({ ...c, url: ctx.url(), apiKey }), ctx.env);
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
