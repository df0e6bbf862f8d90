/**
 * db create|ls|get|rm|rotate|restore|extensions|snapshot|psql. The API shows a password once: the CLI keeps the
 * connection strings it was shown in its 0600 config, so `db psql` can connect without printing one.
 */
import { spawn } from "child_process";
import type { Argv } from "yargs";
import { Run, UsageError } from "./context";
import { restoreDatabase, showExtensions } from "./db-restore";
import { remember, showSecret } from "./db-secrets";
import { bar, printJson, printRecord, printTable } from "./output";

/** libpq's environment for a connection string: nothing secret goes on psql's command line. */
export function libpqEnv(connectionString: string): Record<string, string> {
  const url = new URL(connectionString);
  const env: Record<string, string> = {
    PGHOST: url.hostname,
    PGPORT: url.port || "5432",
    PGUSER: decodeURIComponent(url.username),
    PGPASSWORD: decodeURIComponent(url.password),
    PGDATABASE: decodeURIComponent(url.pathname.slice(1)),
  };
  const sslmode = url.searchParams.get("sslmode");
  if (sslmode) env.PGSSLMODE = sslmode;
  return env;
}

const idArg = <T>(c: Argv<T>) => c.positional("id", { type: "string", demandOption: true });

export function dbCommands(y: Argv, run: Run): Argv {
  return y.command("db", "PostgreSQL databases", (d) =>
    d
      .command(
        "create",
        "create a database (its password is shown once)",
        (c) => c.option("max-storage-mb", { type: "number" }).option("from-snapshot", { type: "string", describe: "restore a snapshot into it" }),
        run(async (ctx, args) => {
          const body: { maxStorageMb?: number; fromSnapshot?: string } = {};
          if (args.maxStorageMb !== undefined) body.maxStorageMb = args.maxStorageMb;
          if (args.fromSnapshot) body.fromSnapshot = args.fromSnapshot;
          showSecret(ctx, await ctx.client().createDatabase(body), "Created");
        }),
      )
      .command(
        "ls",
        "your databases",
        (c) => c,
        run(async (ctx) => {
          const { databases } = await ctx.client().listDatabases();
          const rows = databases.map((db) => [
            db.id,
            db.databaseName,
            db.status ?? "active",
            `${db.host}:${db.port}`,
            `${bar(db.storageMb, db.maxStorageMb)} ${db.storageMb}/${db.maxStorageMb} MiB`,
            db.createdAt,
          ]);
          printTable(ctx, ["id", "database", "status", "host", "storage", "created"], rows, databases);
        }),
      )
      .command(
        "get <id>",
        "one database",
        idArg,
        run(async (ctx, args) => printRecord(ctx, await ctx.client().getDatabase(args.id))),
      )
      .command(
        "rm <id>",
        "destroy a database and its data",
        idArg,
        run(async (ctx, args) => {
          const result = await ctx.client().deleteDatabase(args.id);
          remember(ctx, args.id, undefined);
          if (ctx.json) printJson(ctx, result ?? { id: args.id, deleted: true });
          else ctx.stderr.write(`Destroyed ${args.id}\n`);
        }),
      )
      .command(
        "rotate <id>",
        "a new password (the old one stops working; shown once)",
        idArg,
        run(async (ctx, args) => showSecret(ctx, await ctx.client().rotatePassword(args.id), "Rotated")),
      )
      .command(
        "restore <id>",
        "a new database with this one's data as of --at (within its restore window; also after it was destroyed)",
        (c) =>
          idArg(c)
            .option("at", { type: "string", demandOption: true, describe: "ISO 8601 with a time zone, e.g. 2026-11-27T15:04:05Z" })
            .option("wait", { type: "boolean", default: true, describe: "wait until it is active or failed (--no-wait: answer at once, restoring)" }),
        run(async (ctx, args: { id: string; at: string; wait: boolean }) => restoreDatabase(ctx, args.id, args.at, args.wait)),
      )
      .command(
        "extensions <id>",
        "the extensions this database may create (available) and has (installed)",
        idArg,
        run(async (ctx, args) => showExtensions(ctx, args.id)),
      )
      .command(
        "snapshot <id>",
        "take a snapshot (a dump, taken in the background)",
        idArg,
        run(async (ctx, args) => printRecord(ctx, await ctx.client().createSnapshot(args.id))),
      )
      .command(
        "psql <id>",
        "run psql on a database this CLI created or rotated (arguments after -- go to psql)",
        (c) =>
          idArg(c).option("pooled", { type: "boolean", describe: "through the platform's pooler (transaction mode: no session state between transactions)" }),
        run(async (ctx, args: { id: string; pooled?: boolean }) => {
          const stored = ctx.stored();
          const connection = (args.pooled ? stored.pooledDatabases : stored.databases)?.[args.id];
          if (!connection && args.pooled && stored.databases?.[args.id])
            throw new UsageError(
              `No pooled connection stored for ${args.id}: the platform runs no pooler, or it was created before one (\`ci-platform db rotate ${args.id}\` stores both)`,
            );
          if (!connection)
            throw new UsageError(`No stored password for ${args.id}: \`ci-platform db rotate ${args.id}\` makes a new one (the old one stops working)`);
          const extra = ((args as { "--"?: unknown[] })["--"] ?? []).map(String);
          const child = spawn(ctx.env.PSQL || "psql", extra, { stdio: "inherit", env: { ...ctx.env, ...libpqEnv(connection) } as NodeJS.ProcessEnv });
          process.exitCode = await new Promise<number>((resolve, reject) => {
            child.once("error", (err) => reject(new UsageError(`Cannot run psql: ${err.message}`)));
            child.once("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
          });
        }),
      )
      .demandCommand(1),
  );
}
