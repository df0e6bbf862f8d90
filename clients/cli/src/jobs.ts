/** jobs run|ls|get|logs|cancel|artifacts. `jobs run --wait/--follow` exits with the job's exit code. */
import { createWriteStream } from "fs";
import { Readable, Writable } from "stream";
import { pipeline } from "stream/promises";
import type { Argv } from "yargs";
import type { Job, JobRequest } from "../../sdk/src";
import { platformAccess } from "./access";
import { Context, Run, UsageError } from "./context";
import { endedLine, jobExitCode, resolveJobId, waitWithProgress, whileWatching } from "./job-wait";
import { liveLine, printJson, printRecord, printTable, statusText, truncate } from "./output";
import { rawOption, untrustedText } from "./terminal";

/** `K=V` pairs into an object; a pair without `=` or with a bad name is the caller's mistake. */
export function parseEnv(pairs: string[] = []): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq < 1) throw new UsageError(`--env wants NAME=VALUE, got ${JSON.stringify(pair)}`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return env;
}

/** Words a POSIX shell reads as themselves, unquoted; `=` is left out (a first word with it is an assignment). */
const PLAIN_WORD = /^[A-Za-z0-9_@%+:,./-]+$/;
/** Words a shell reads as syntax in the first position (bash's among them). */
const RESERVED = new Set([
  "case",
  "coproc",
  "do",
  "done",
  "elif",
  "else",
  "esac",
  "fi",
  "for",
  "function",
  "if",
  "in",
  "select",
  "then",
  "time",
  "until",
  "while",
]);

/** One argv element for `sh -c`: as is when plain, else single-quoted (a quote inside as '\''). */
export function shellWord(word: string): string {
  return PLAIN_WORD.test(word) && !RESERVED.has(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}

/**
 * The job's `command` (one shell command line) from the words after `--`: one word is a shell
 * command as written (`-- 'make && make test'`); several are an argv, run exactly as given, so
 * `-- sh -c 'echo hello; exit 3'` stays three words.
 */
export function jobCommand(words: string[]): string {
  return words.length === 1 ? words[0] : words.map(shellWord).join(" ");
}

/** The job's output as it comes (or all of it at once, `follow` false), neutralised on a terminal unless `raw`. */
async function printOutput(ctx: Context, id: string, opts: { follow: boolean; attempt?: number; raw?: boolean }): Promise<void> {
  const out = untrustedText(ctx.stdout, opts.raw);
  if (!opts.follow) out.write(await ctx.client().jobLogs(id, opts.attempt));
  else for await (const chunk of ctx.client().followLogs(id, { attempt: opts.attempt })) out.write(chunk);
  out.end();
}

type Dependency = NonNullable<JobRequest["dependsOn"]>[number];
const CONDITIONS = ["succeeded", "failed", "finished"] as const;

/** `--after` values: `ID` (must succeed), `ID:failed`, `ID:finished`, `array:ID[:condition]` (every job of the array). */
export function afterDependency(value: string): Dependency {
  const parts = value.split(":");
  const isArray = parts[0] === "array";
  const [id, condition = "succeeded"] = isArray ? parts.slice(1) : parts;
  if (!id || !(CONDITIONS as readonly string[]).includes(condition) || parts.length > (isArray ? 3 : 2))
    throw new UsageError(`--after wants ID[:succeeded|failed|finished] or array:ID[:condition], got ${JSON.stringify(value)}`);
  const c = condition as Dependency["condition"];
  return isArray ? { arrayId: id, condition: c } : { jobId: id, condition: c };
}

/** `jobs run --array N`: prints the array's id (and its job ids with --json); `--wait` waits until every job ended, exit 0 if all succeeded. */
async function runArray(ctx: Context, body: JobRequest & { arrayCount: number }, wait: boolean): Promise<void> {
  const created = await ctx.client().submitArray(body);
  if (ctx.json) ctx.stdout.write(JSON.stringify(created) + "\n");
  else ctx.stdout.write(`${created.arrayId}\n`);
  if (!wait) return;
  const line = liveLine(ctx.stderr);
  try {
    for (;;) {
      const array = await ctx.client().getArray(created.arrayId);
      const { completed = 0, failed = 0, cancelled = 0 } = array.counts;
      line.update(
        `${array.id} ${Object.entries(array.counts)
          .map(([s, n]) => `${s} ${n}`)
          .join(" · ")}`,
      );
      if (completed + failed + cancelled >= array.total) {
        process.exitCode = completed === array.total ? 0 : 1;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  } finally {
    line.done();
  }
}

function showJob(ctx: Context, job: Job): void {
  if (ctx.json) return printJson(ctx, job);
  printRecord(ctx, {
    id: job.id,
    status: statusText(ctx.stdout, job.status),
    statusReason: job.statusReason,
    errorMessage: job.errorMessage,
    queuePosition: job.queuePosition,
    gpuType: job.gpuType,
    gpuCount: job.gpuCount,
    command: job.command,
    attempts: job.attempts,
    exitCode: job.result?.exitCode ?? null,
    gpuSecondsUsed: job.gpuSecondsUsed,
    platformAccess: job.platformAccess,
    arrayId: job.arrayId,
    arrayIndex: job.arrayIndex,
    dependsOn: job.dependsOn,
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    completedAt: job.completedAt,
  });
}

export function jobCommands(y: Argv, run: Run): Argv {
  return y.command("jobs", "GPU jobs", (j) =>
    j
      .command(
        "run",
        "submit a job: ci-platform jobs run [options] -- COMMAND [ARG…] (several words: run as that argv; one word: a shell command line)",
        (c) =>
          c
            .option("gpu", { type: "string", describe: "GPU type (default: any)" })
            .option("gpus", { type: "number", describe: "cards on one node (default 1)" })
            .option("timeout", { type: "number", describe: "seconds the job may run" })
            .option("image", { type: "string", describe: "container image (Docker executor)" })
            .option("priority", { choices: ["low", "normal", "high"] as const })
            .option("retries", { type: "number", describe: "retries after a failure" })
            .option("preemptible", { type: "boolean", describe: "runs on idle cards only and yields them to waiting jobs (priced lower)" })
            .option("env", { type: "string", array: true, describe: "NAME=VALUE (repeatable)" })
            .option("platform-access", {
              type: "string",
              describe: "the job's own token and database roles: comma list of scopes, db:<id> (implies databases:write), model:<id> (implies inference)",
            })
            .option("array", { type: "number", describe: "submit N jobs at once (an array); each sees CI_ARRAY_INDEX (0…N-1) and CI_ARRAY_ID" })
            .option("parallelism", { type: "number", describe: "with --array: at most this many of them run at once" })
            .option("after", {
              type: "string",
              array: true,
              describe: "wait for job ID to succeed first (repeatable); ID:failed or ID:finished for another condition, array:ID for every job of an array",
            })
            .option("wait", { type: "boolean", describe: "wait for the end (a live status line on a terminal); exit with its code" })
            .option("follow", { alias: "f", type: "boolean", describe: "print its output as it comes; exit with its code" })
            .option("cancel-on-interrupt", {
              type: "boolean",
              describe: "Ctrl-C while waiting cancels the job (else: asked on a terminal, left running otherwise)",
            })
            .option(...rawOption),
        run(async (ctx, args) => {
          const words = ((args as { "--"?: unknown[] })["--"] ?? []).map(String);
          if (!words.length) throw new UsageError("No command: ci-platform jobs run [options] -- COMMAND…");
          const body: JobRequest = { command: jobCommand(words) };
          if (args.gpu) body.gpuType = args.gpu;
          if (args.gpus !== undefined) body.gpuCount = args.gpus;
          if (args.timeout !== undefined) body.timeoutSeconds = args.timeout;
          if (args.image) body.containerImage = args.image;
          if (args.priority) body.priority = args.priority;
          if (args.retries !== undefined) body.maxRetries = args.retries;
          if (args.preemptible) body.preemptible = true;
          if (args.env?.length) body.env = parseEnv(args.env);
          if (args.platformAccess !== undefined) body.platformAccess = platformAccess(args.platformAccess);
          if (args.after?.length) body.dependsOn = args.after.map(afterDependency);
          if (args.parallelism !== undefined && args.array === undefined) throw new UsageError("--parallelism needs --array N");
          if (args.array !== undefined)
            return runArray(ctx, { ...body, arrayCount: args.array, arrayParallelism: args.parallelism }, Boolean(args.wait || args.follow));
          const { id } = await ctx.client().submitJob(body);
          if (!args.wait && !args.follow) {
            if (ctx.json) ctx.stdout.write(JSON.stringify({ id }) + "\n");
            else ctx.stdout.write(`${id}\n`);
            return;
          }
          if (!ctx.json) ctx.stderr.write(`job ${id} submitted\n`);
          const job = await whileWatching(ctx, id, Boolean(args.cancelOnInterrupt), async () => {
            if (args.follow) await printOutput(ctx, id, { follow: true, raw: args.raw });
            return waitWithProgress(ctx, id);
          });
          if (ctx.json) ctx.stdout.write(JSON.stringify(job) + "\n");
          else ctx.stderr.write(endedLine(ctx, job));
          process.exitCode = jobExitCode(job);
        }),
      )
      .command(
        "ls",
        "your jobs, newest first",
        (c) => c,
        run(async (ctx) => {
          const { jobs } = await ctx.client().listJobs();
          const rows = jobs.map((job) => [job.id, statusText(ctx.stdout, job.status), job.gpuType, job.gpuCount, job.createdAt, truncate(job.command, 40)]);
          printTable(ctx, ["id", "status", "gpu", "cards", "created", "command"], rows, jobs);
        }),
      )
      .command(
        "get <id>",
        "one job",
        (c) => c.positional("id", { type: "string", demandOption: true }),
        run(async (ctx, args) => showJob(ctx, await ctx.client().getJob(await resolveJobId(ctx, args.id)))),
      )
      .command(
        "logs <id>",
        "a job's output (-f: follow it until the job ends)",
        (c) =>
          c
            .positional("id", { type: "string", demandOption: true })
            .option("follow", { alias: "f", type: "boolean" })
            .option("attempt", { type: "number" })
            .option(...rawOption),
        run(async (ctx, args) => printOutput(ctx, await resolveJobId(ctx, args.id), { follow: Boolean(args.follow), attempt: args.attempt, raw: args.raw })),
      )
      .command(
        "cancel <id>",
        "cancel a job",
        (c) => c.positional("id", { type: "string", demandOption: true }),
        run(async (ctx, args) => showJob(ctx, await ctx.client().cancelJob(await resolveJobId(ctx, args.id)))),
      )
      .command(
        "artifacts <id>",
        "the job's artifacts as a tar archive (-o FILE, or stdout when it is not a terminal)",
        (c) => c.positional("id", { type: "string", demandOption: true }).option("output", { alias: "o", type: "string" }),
        run(async (ctx, args) => {
          if (!args.output && ctx.stdout.isTTY) throw new UsageError("Not writing a tar archive to a terminal: use -o FILE or a pipe");
          const body = await ctx.client().jobArtifacts(await resolveJobId(ctx, args.id));
          const target: Writable = args.output ? createWriteStream(args.output, { mode: 0o600 }) : ctx.stdout;
          await pipeline(Readable.fromWeb(body as import("stream/web").ReadableStream), target, { end: Boolean(args.output) });
        }),
      )
      .demandCommand(1),
  );
}
