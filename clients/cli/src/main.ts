/**
 * `ci-platform`: the command line of the platform, on the SDK. Exit codes: 0, 1 for an API
 * refusal or failure (its message), 2 for a usage mistake, or a job's own with `jobs run --wait`.
 */
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { ApiError } from "../../sdk/src";
import { accountCommands } from "./account";
import { GlobalArgs, makeContext, Run, UsageError } from "./context";
import { dbCommands } from "./db";
import { jobCommands } from "./jobs";
import { miscCommands } from "./misc";
import { scheduleCommands } from "./schedules";
import { forTerminal } from "./terminal";
import { tokenCommands } from "./tokens";

/** An error's text on stderr: the platform's messages can quote what a provider or a job said. */
const printError = (text: string) => process.stderr.write(forTerminal(process.stderr, text));

function fail(err: unknown): void {
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
  try {
    await fn(makeContext(args as GlobalArgs), args);
  } catch (err) {
    fail(err);
  }
};

export async function main(argv = hideBin(process.argv)): Promise<void> {
  let cli = yargs(argv)
    .scriptName("ci-platform")
    .parserConfiguration({ "populate--": true })
    .option("json", { type: "boolean", default: false, describe: "JSON output, for scripts" })
    .option("url", { type: "string", describe: "the platform's URL (else CI_PLATFORM_URL, else the stored one)" })
    .env(false)
    .strict()
    .demandCommand(1)
    .recommendCommands()
    .fail((message, err) => {
      if (err) throw err;
      process.stderr.write(`error: ${message}\nRun with --help for usage.\n`);
      process.exit(2);
    })
    .help()
    .version(false) as yargs.Argv<GlobalArgs>;
  cli = accountCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = jobCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = dbCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = tokenCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = scheduleCommands(cli, run) as yargs.Argv<GlobalArgs>;
  cli = miscCommands(cli, run) as yargs.Argv<GlobalArgs>;
  await cli.parseAsync();
}

if (require.main === module) main().catch(fail);
