/**
 * tokens create|ls|rm: restricted tokens (`cit_…`, docs/accounts.md). Creating one needs the
 * account's password (the API takes a JWT only, never a key or a token); listing and deleting take
 * the stored API key. The token is printed once, on stdout, so a script can capture it.
 */
import type { Argv } from "yargs";
import type { Schemas } from "../../sdk/src";
import { passwordOptions, signedIn } from "./account";
import { tokenRequest } from "./access";
import { Run } from "./context";
import { paint, printJson, printTable } from "./output";

const credits = (t: Schemas["TokenInfo"]) => `${t.creditsUsed}/${t.maxCredits ?? "∞"}`;

export function tokenCommands(y: Argv, run: Run): Argv {
  return y.command("tokens", "restricted tokens (cit_…): limited scopes, models, databases, lifetime and credits", (t) =>
    t
      .command(
        "create",
        "create a token (shown once): --name N --scopes a,b [--models m1,m2] [--databases id1,id2] [--expires-in S] [--max-credits X]; signs in with --email and a password",
        (c) =>
          passwordOptions(c)
            .option("name", { type: "string", describe: "what it is for (1–64 characters)" })
            .option("scopes", { type: "string", describe: "comma list: jobs:read, jobs:write, inference, databases:read, databases:write, usage:read" })
            .option("models", { type: "string", describe: "comma list: only these models" })
            .option("databases", { type: "string", describe: "comma list of database ids: only these" })
            .option("expires-in", { type: "number", describe: "seconds it lives, 60–31536000 (default 86400)" })
            .option("max-credits", { type: "number", describe: "credits it may use (default: no limit beyond the account's)" })
            .demandOption(["email", "name", "scopes"]),
        run(async (ctx, args) => {
          // Checked before signing in: a mistake sends nothing.
          const body = tokenRequest(args);
          const created = await (await signedIn(ctx, args)).createToken(body);
          if (ctx.json) printJson(ctx, created);
          else ctx.stdout.write(`${created.token}\n`);
          ctx.stderr.write(`Token ${created.id} "${created.name}": ${created.scopes.join(", ")}, expires ${created.expiresAt}\n`);
          ctx.stderr.write(paint(ctx.stderr, "yellow", "Shown once: keep it safe; it cannot be shown again (`ci-platform tokens rm ID` revokes it).\n"));
        }),
      )
      .command(
        "ls",
        "the account's tokens (never their secrets), those issued to jobs included",
        (c) => c,
        run(async (ctx) => {
          const { tokens } = await ctx.client().listTokens();
          const rows = tokens.map((t) => [t.id, t.name, t.scopes.join(","), t.expiresAt, credits(t), t.lastUsedAt ?? "-", t.jobId ?? "-"]);
          printTable(ctx, ["id", "name", "scopes", "expires", "credits used/max", "last used", "job"], rows, tokens);
        }),
      )
      .command(
        "rm <id>",
        "delete a token: refused everywhere within a second",
        (c) => c.positional("id", { type: "string", demandOption: true }),
        run(async (ctx, args) => {
          const result = await ctx.client().deleteToken(args.id);
          if (ctx.json) printJson(ctx, result);
          else ctx.stderr.write(`Deleted ${args.id}\n`);
        }),
      )
      .demandCommand(1),
  );
}
