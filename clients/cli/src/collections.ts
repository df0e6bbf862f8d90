/** arrays get|cancel (job arrays) and snapshots ls|get|rm (database snapshots): the API's resources that had no command. */
import type { Argv } from "yargs";
import type { Run } from "./context";
import { printJson, printRecord, printTable } from "./output";

const idArg = <T>(c: Argv<T>) => c.positional("id", { type: "string", demandOption: true });

export function collectionCommands(y: Argv, run: Run): Argv {
  return y
    .command("arrays", "job arrays (jobs run --array N)", (a) =>
      a
        .command(
          "get <id>",
          "an array's jobs counted by status",
          idArg,
          run(async (ctx, args) => {
            const array = await ctx.client().getArray(args.id);
            if (ctx.json) return printJson(ctx, array);
            printRecord(ctx, { id: array.id, total: array.total, ...array.counts });
          }),
        )
        .command(
          "cancel <id>",
          "cancel every job of the array not yet finished",
          idArg,
          run(async (ctx, args) => {
            const result = await ctx.client().cancelArray(args.id);
            if (ctx.json) return printJson(ctx, result);
            const array = await ctx.client().getArray(args.id);
            printRecord(ctx, { id: array.id, total: array.total, ...array.counts });
          }),
        )
        .demandCommand(1),
    )
    .command("snapshots", "database snapshots (db snapshot ID takes one)", (s) =>
      s
        .command(
          "ls",
          "your snapshots, newest first",
          (c) => c,
          run(async (ctx) => {
            const { snapshots } = await ctx.client().listSnapshots();
            const rows = snapshots.map((n) => [n.id, n.status, n.databaseName, n.sizeMb, n.createdAt]);
            printTable(ctx, ["id", "status", "database", "MiB", "created"], rows, { snapshots });
          }),
        )
        .command(
          "get <id>",
          "one snapshot",
          idArg,
          run(async (ctx, args) => printRecord(ctx, await ctx.client().getSnapshot(args.id))),
        )
        .command(
          "rm <id>",
          "delete a snapshot",
          idArg,
          run(async (ctx, args) => {
            const result = await ctx.client().deleteSnapshot(args.id);
            if (ctx.json) printJson(ctx, result ?? { id: args.id, deleted: true });
            else ctx.stderr.write(`Deleted snapshot ${args.id}\n`);
          }),
        )
        .demandCommand(1),
    );
}
