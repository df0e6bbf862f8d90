/**
 * Waiting for a job from the command line: short id prefixes (as the console shows them), the
 * live status line, what an ended job says (its status, exit code and `errorMessage`), and Ctrl-C
 * while waiting — the job is the platform's, not the terminal's: it asks on a terminal, cancels
 * with `--cancel-on-interrupt`, otherwise leaves it running and says how to re-attach (as `docker
 * attach` and `kubectl logs -f` let go of what they watch).
 */
import readline from "readline";
import type { Job } from "../../sdk/src";
import { Context, UsageError } from "./context";
import { liveLine, statusText } from "./output";
import { forTerminal } from "./terminal";

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The shortest prefix taken for a job id (the console shows 8 characters). */
const MIN_PREFIX = 4;

/** A job id, or a unique prefix of one of the account's latest jobs (`jobs ls`). */
export async function resolveJobId(ctx: Context, given: string): Promise<string> {
  if (FULL_ID.test(given) || given.length < MIN_PREFIX || !/^[0-9a-f-]+$/i.test(given)) return given;
  const { jobs } = await ctx.client().listJobs();
  const matches = jobs.filter((job) => job.id.startsWith(given.toLowerCase()));
  if (matches.length === 1) return matches[0].id;
  if (!matches.length) return given; // the platform answers for it (404 naming the id)
  throw new UsageError(`${given} is more than one job (${matches.map((j) => j.id).join(", ")}): give more of the id`);
}

/** The process exit code a finished job maps to: its own, 1 for a failure without one, 130 for a cancel. */
export function jobExitCode(job: Job): number {
  if (job.status === "completed") return job.result?.exitCode ?? 0;
  if (job.status === "cancelled") return 130;
  return job.result?.exitCode || 1;
}

/** One line for an ended job: status, exit code, and why it failed or was cancelled. */
export function endedLine(ctx: Context, job: Job): string {
  const code = job.result?.exitCode !== undefined ? ` (exit code ${job.result.exitCode})` : "";
  const why = job.status === "completed" ? "" : (job.errorMessage ?? job.statusReason ?? "");
  // The reason can quote what the job printed: neutralised on a terminal.
  return `job ${job.id} ${statusText(ctx.stderr, job.status)}${code}${why ? `: ${forTerminal(ctx.stderr, why)}` : ""}\n`;
}

const progress = (job: Job) =>
  [job.status, job.queuePosition !== null && job.queuePosition !== undefined ? `queue position ${job.queuePosition}` : "", job.statusReason ?? ""]
    .filter(Boolean)
    .join(" · ");

export async function waitWithProgress(ctx: Context, id: string): Promise<Job> {
  const sdk = ctx.client();
  const line = liveLine(ctx.stderr);
  // Status events come at each change; the queue position moves between them, so a terminal re-reads it.
  const timer = ctx.stderr.isTTY
    ? setInterval(
        () =>
          void sdk.getJob(id).then(
            (j) => line.update(`${id} ${progress(j)}`),
            () => undefined,
          ),
        1000,
      )
    : undefined;
  try {
    return await sdk.waitForJob(id, { onUpdate: (j) => line.update(`${id} ${progress(j)}`) });
  } finally {
    if (timer) clearInterval(timer);
    line.done();
  }
}

/** Asks a yes/no question on the terminal; a second Ctrl-C (or end of input) is no. */
function ask(ctx: Context, question: string): Promise<boolean> {
  const rl = readline.createInterface({ input: ctx.stdin, output: ctx.stderr });
  return new Promise((resolve) => {
    rl.once("SIGINT", () => (rl.close(), resolve(false)));
    rl.once("close", () => resolve(false));
    rl.question(question, (answer) => (rl.close(), resolve(/^y(es)?$/i.test(answer.trim()))));
  });
}

/**
 * Runs `work` (following or waiting for job `id`) with Ctrl-C handled: cancel the job (asked on a
 * terminal, at once with `cancelOnInterrupt`) or let it run, then exit 130 saying which.
 */
export async function whileWatching<T>(ctx: Context, id: string, cancelOnInterrupt: boolean, work: () => Promise<T>): Promise<T> {
  const onInterrupt = () => void interrupted();
  const interrupted = async () => {
    process.off("SIGINT", onInterrupt);
    ctx.stderr.write("\n");
    const cancel = cancelOnInterrupt || (ctx.stdin.isTTY && ctx.stderr.isTTY && (await ask(ctx, `Cancel job ${id}? [y/N] `)));
    if (cancel) {
      const job = await ctx.client().cancelJob(id);
      ctx.stderr.write(`job ${id} ${job.status === "cancelled" ? "cancelled" : job.status}\n`);
    } else {
      ctx.stderr.write(`job ${id} is still running. Re-attach: ci-platform jobs logs -f ${id}; cancel: ci-platform jobs cancel ${id}\n`);
    }
    process.exit(130);
  };
  process.on("SIGINT", onInterrupt);
  try {
    return await work();
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}
