/**
 * `ci-platform`: the command line of the platform, on the SDK. Exit codes: 0, 1 for an API
 * refusal or failure (its message) or a platform it cannot reach (naming the URL), 2 for a usage
 * mistake, or a job's own with `jobs run --wait` (job-wait.ts jobExitCode).
 */
import { existsSync, readFileSync } from "fs";
import path from "path";
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { ApiError, ConnectionError, TimeoutError } from "../../sdk/src";
import { accountCommands } from "./account";
import { batchCommands } from "./batches";
import { collectionCommands } from "./collections";
import { GlobalArgs, makeContext, Run, UsageError } from "./context";
import { dbCommands } from "./db";
import { deploymentCommands } from "./deployments";
import { jobCommands } from "./jobs";
import { miscCommands } from "./misc";
import { scheduleCommands } from "./schedules";
import { forTerminal } from "./terminal";
import { tokenCommands } from "./tokens";

/** An error's text on stderr: the platform's messages can quote what a provider or a job said. */
const printError = (text: string) => process.stderr.write(forTerminal(process.stderr, text));

/** The system's code of an error that never reached the platform (ECONNREFUSED, ENOTFOUND, a timeout…), else undefined. */
const unreachable = (err: unknown): string | undefined => {
  if (err instanceof TimeoutError) return `no answer within ${err.timeoutMs} ms`;
  if (err instanceof ConnectionError) return unreachable(err.cause) ?? "no connection";
  const cause = (err as { cause?: { code?: unknown; message?: unknown } })?.cause;
  if (typeof cause?.code === "string") return cause.code;
  if (err instanceof TypeError && err.message === "fetch failed") return typeof cause?.message === "string" ? cause.message : err.message;
  return err instanceof Error && /^(TimeoutError|AbortError)$/.test(err.name) ? err.name : undefined;
};

/** The CLI's own version: the platform's, from the package.json of this checkout (the nearest one up, built or not). */
function ownVersion(dir = __dirname): string {
  const file = path.join(dir, "package.json");
  if (existsSync(file)) {
    const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version: string };
    if (pkg.name === "ci-platform") return pkg.version;
  }
  const parent = path.dirname(dir);
  return parent === dir ? "unknown" : ownVersion(parent);
}

function fail(err: unknown, url?: string): void {
  const code = unreachable(err);
  if (code && url) {
    printError(`error: cannot reach the platform at ${url} (${code}): is it running, and is that its URL? (--url, CI_PLATFORM_URL, or login --url)\n`);
    process.exitCode = 1;
    return;
  }
  if (err instanceof ApiError) {
    printError(`error: ${err.message} (${err.code}, HTTP ${err.status})\n`);
    if (Array.isArray(err.details))
      for (const d of err.details as Array<{ field?: string; message?: string }>) printError(`  ${d.field ?? ""}: ${d.message ?? ""}\n`);
    process.exitCode = 1;
  } else if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    const cause = (err as { cause?: { code?: string } })?.cause?.code;
    printError(`error: ${err instanceof Error ? err.message : String(err)}${cause ? ` (${cause})` : ""}\n`);
    process.exitCode = 1;
  }
}

const run: Run = (fn) => async (args) => {
  let url: string | undefined;
  try {
    const ctx = makeContext(args as GlobalArgs);
    url = (() => {
      try {
        return ctx.url();
      } catch {
        return undefined;
      }
    })();
    await fn(ctx, args);
  } catch (err) {
    fail(err, url);
  }
};

export async function main(argv = hideBin(process.argv)): Promise<void> {
  let cli = yargs(argv)
    .scriptName("ci-platform")
    .parserConfiguration({ "populate--": true })
    .option("json", { type: "boolean", default: false, describe: "JSON output, for scripts" })
    .option("url", { type: "string", describe: "the platform's URL (else CI_PLATFORM_URL, else the profile's)" })
    .option("profile", { type: "string", describe: "the stored settings to use (else CI_PLATFORM_PROFILE, else default)" })
    .env(false)
    .strict()
    .demandCommand(1)
    .recommendCommands()
    .fail((message, err) => {
      if (err) throw err;
      process.stderr.write(`error: ${message}\nRun with --help for usage.\n`);
      process.exit(2);
    })
    .completion("completion", "print the shell completion script (bash, or zsh when $SHELL is zsh): ci-platform completion >> ~/.bashrc")
    .help()
    .version(ownVersion()) as yargs.Argv<GlobalArgs>;
  cli = accountCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = jobCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = dbCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = batchCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = tokenCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = scheduleCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = deploymentCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = collectionCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = miscCommands(cli, run) as yargs.Argv<GlobalArgs>;
  await cli.parseAsync();
}

if (require.main === module) main().catch(fail);
