/**
 * The connection strings the API shows once (create, rotate, restore): kept in the CLI's 0600
 * config for `db psql` (and `db psql --pooled`), and shown with a warning that they are shown once.
 */
import type { Context } from "./context";
import { paint, printJson, printRecord } from "./output";

type Secret = { id: string; password: string; connectionString: string; pooledConnectionString?: string };

/** Keeps (or, with none, forgets) a database's connection strings in the 0600 config. */
export function remember(ctx: Context, id: string, strings: Partial<Secret> | undefined): void {
  const keep = (map: Record<string, string> | undefined, value: string | undefined) => {
    const next = { ...map };
    if (value) next[id] = value;
    else delete next[id];
    return next;
  };
  ctx.store((c) => ({
    ...c,
    databases: keep(c.databases, strings?.connectionString),
    pooledDatabases: keep(c.pooledDatabases, strings?.pooledConnectionString),
  }));
}

export function showSecret(ctx: Context, created: Secret, what: string): void {
  remember(ctx, created.id, created);
  if (ctx.json) return printJson(ctx, created);
  printRecord(ctx, created);
  ctx.stderr.write(paint(ctx.stderr, "yellow", `${what}: the password is shown once (kept for \`ci-platform db psql ${created.id}\` in the 0600 config).\n`));
}
