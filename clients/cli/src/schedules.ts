/**
 * schedules create|ls|rm: cron schedules of GPU jobs (docs/jobs.md "Schedules"). `create` takes the
 * job as `jobs run` does (the words after `--`), with a 5-field cron expression and a time zone.
 */
import type { Argv } from "yargs";
import type { JobRequest, ScheduleRequest } from "../../sdk/src";
import { Run, UsageError } from "./context";
import { jobCommand, parseEnv } from "./jobs";
import { printJson, printRecord, printTable, truncate } from "./output";

export function scheduleCommands(y: Argv, run: Run): Argv {
  return y.command("schedules", "cron schedules of GPU jobs", (s) =>
    s
      .command(
        "create",
        "create a schedule: ci-platform schedules create --name N --cron 'M H DoM Mon DoW' [--tz Europe/Berlin] [--concurrency forbid|replace|allow] [job options] -- COMMAND…",
        (c) =>
          c
            .option("name", { type: "string", describe: "what it is for" })
            .option("cron", { type: "string", describe: "5 fields: minute hour day-of-month month day-of-week" })
            .option("tz", { type: "string", describe: "IANA time zone (default UTC)" })
            .option("concurrency", { choices: ["allow", "forbid", "replace"] as const, describe: "a tick while the last job runs (default forbid)" })
            .option("gpu", { type: "string", describe: "GPU type (default: any)" })
            .option("gpus", { type: "number", describe: "cards on one node (default 1)" })
            .option("timeout", { type: "number", describe: "seconds each job may run" })
            .option("image", { type: "string", describe: "container image (Docker executor)" })
            .option("env", { type: "string", array: true, describe: "NAME=VALUE (repeatable)" })
            .option("preemptible", { type: "boolean", describe: "the jobs yield their cards to waiting jobs (cheaper)" })
            .demandOption(["name", "cron"]),
        run(async (ctx, args) => {
          const words = ((args as { "--"?: unknown[] })["--"] ?? []).map(String);
          if (!words.length) throw new UsageError("No command: ci-platform schedules create [options] -- COMMAND…");
          const job: JobRequest = { command: jobCommand(words) };
          if (args.gpu) job.gpuType = args.gpu;
          if (args.gpus !== undefined) job.gpuCount = args.gpus;
          if (args.timeout !== undefined) job.timeoutSeconds = args.timeout;
          if (args.image) job.containerImage = args.image;
          if (args.env?.length) job.env = parseEnv(args.env);
          if (args.preemptible) job.preemptible = true;
          const body: ScheduleRequest = { name: args.name, cron: args.cron, job };
          if (args.tz) body.timezone = args.tz;
          if (args.concurrency) body.concurrency = args.concurrency;
          const created = await ctx.client().createSchedule(body);
          if (ctx.json) return printJson(ctx, created);
          printRecord(ctx, { id: created.id, name: created.name, cron: created.cron, timezone: created.timezone, nextRunAt: created.nextRunAt });
        }),
      )
      .command(
        "ls",
        "your schedules, newest first",
        (c) => c,
        run(async (ctx) => {
          const { schedules } = await ctx.client().listSchedules();
          const rows = schedules.map((s) => [
            s.id,
            s.name,
            s.cron,
            s.timezone,
            s.paused ? "paused" : (s.nextRunAt ?? "-"),
            s.lastJobId ?? "-",
            s.skipped,
            truncate(s.job.command, 30),
          ]);
          printTable(ctx, ["id", "name", "cron", "tz", "next run", "last job", "skipped", "command"], rows, schedules);
        }),
      )
      .command(
        "rm <id>",
        "delete a schedule (its jobs stay)",
        (c) => c.positional("id", { type: "string", demandOption: true }),
        run(async (ctx, args) => {
          const result = await ctx.client().deleteSchedule(args.id);
          if (ctx.json) printJson(ctx, result);
          else ctx.stderr.write(`Deleted ${args.id}\n`);
        }),
      )
      .demandCommand(1),
  );
}
