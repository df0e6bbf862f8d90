/** gpus, models ls, chat (chat.ts), usage. */
import type { Argv } from "yargs";
import { chatCommand } from "./chat";
import { Context, Run } from "./context";
import { bar, printJson, printTable } from "./output";

/** 80 °C and above reads as a full bar. */
const HOT_C = 80;

export function miscCommands(y: Argv, run: Run): Argv {
  return chatCommand(y, run)
    .command(
      "gpus",
      "the cluster's cards: utilization, memory and temperature",
      (c) => c,
      run(async (ctx) => {
        const status = await ctx.client().clusterStatus();
        if (ctx.json) return printJson(ctx, status);
        const rows = status.cluster.gpus.map((g) => [
          g.nodeId,
          g.index,
          g.name,
          g.available ? "free" : "busy",
          `${bar(g.utilization, 100)} ${g.utilization}%`,
          `${bar(g.memoryUsed, g.memoryTotal)} ${g.memoryUsed}/${g.memoryTotal} MiB`,
          `${bar(g.temperature, HOT_C)} ${g.temperature}°C`,
        ]);
        printTable(ctx, ["node", "#", "card", "state", "utilization", "memory", "temperature"], rows, status);
        ctx.stdout.write(`${status.cluster.availableGpus}/${status.cluster.totalGpus} free, ${status.queueDepth} job(s) queued\n`);
      }),
    )
    .command("models", "models", (m) =>
      m
        .command(
          "ls",
          "the models inference serves",
          (c) => c,
          run(async (ctx) => {
            const { models } = await ctx.client().listModels();
            printTable(
              ctx,
              ["model", "provider", "size", "description"],
              models.map((x) => [x.name, x.provider, x.parameterSize, x.description]),
              models,
            );
          }),
        )
        .demandCommand(1),
    )
    .command(
      "usage",
      "this month's usage and credits",
      (c) => c.option("from", { type: "string" }).option("to", { type: "string" }),
      run(async (ctx: Context, args) => {
        const usage = await ctx.client().usage({ from: args.from, to: args.to });
        const rows: Array<[string, string | number]> = [
          ["GPU jobs", usage.gpu.jobs],
          ["GPU seconds", usage.gpu.gpuSeconds],
          ["inference requests", usage.inference.requests],
          ["inference tokens", usage.inference.tokens],
          ["databases now", usage.databases.active],
          ["database storage (MiB)", usage.databases.storageMb],
          ["credits", JSON.stringify(usage.credits)],
        ];
        printTable(ctx, [`${usage.from} – ${usage.to}`, ""], rows, usage);
      }),
    );
}
