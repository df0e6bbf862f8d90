/**
 * db restore ID --at TIMESTAMP: a point-in-time restore into a new database (its password shown
 * once and kept, as `db create` does), waited for with its progress unless --no-wait: a live line on
 * a terminal, one line per status change otherwise; exit 1 when it fails, with the platform's
 * reason. db extensions ID: what the database may create and what it has.
 */
import type { Database } from "../../sdk/src";
import { Context } from "./context";
import { remember, showSecret } from "./db-secrets";
import { liveLine, printJson, printTable, statusText } from "./output";
import { forTerminal } from "./terminal";

const POLL_MS = 1000;

export async function restoreDatabase(ctx: Context, sourceId: string, at: string, wait: boolean): Promise<void> {
  const sdk = ctx.client();
  const created = await sdk.restoreDatabase(sourceId, at);
  if (!wait) return showSecret(ctx, created, `Restoring ${sourceId} as of ${at} into ${created.id}`);
  // The secret is kept (and shown) before waiting: an interrupted wait loses nothing.
  if (ctx.json) remember(ctx, created.id, created);
  else showSecret(ctx, created, "Restoring");
  const ended = await waitForRestore(ctx, created.id, `restoring ${sourceId} as of ${at} into ${created.id}`);
  if (ctx.json) printJson(ctx, { ...created, status: ended.status, ...(ended.statusReason ? { statusReason: ended.statusReason } : {}) });
  const reason = ended.statusReason ? `: ${forTerminal(ctx.stderr, ended.statusReason)}` : "";
  ctx.stderr.write(`database ${created.id} ${statusText(ctx.stderr, ended.status ?? "active")}${reason}\n`);
  if (ended.status === "failed") process.exitCode = 1;
}

/** Polls the new database until it is no longer restoring. */
async function waitForRestore(ctx: Context, id: string, what: string): Promise<Database> {
  const sdk = ctx.client();
  const line = liveLine(ctx.stderr);
  const started = Date.now();
  if (!ctx.stderr.isTTY) ctx.stderr.write(`${what}…\n`);
  try {
    for (;;) {
      const db = await sdk.getDatabase(id);
      if (db.status !== "restoring") return db;
      line.update(`${what} · ${Math.round((Date.now() - started) / 1000)} s`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    line.done();
  }
}

export async function showExtensions(ctx: Context, id: string): Promise<void> {
  const { extensions } = await ctx.client().getDatabase(id);
  if (!extensions) {
    ctx.stderr.write(`The extensions of ${id} cannot be read right now (the database server does not answer, or it is not active)\n`);
    process.exitCode = 1;
    return;
  }
  const installed = new Set(extensions.installed);
  const names = [...new Set([...extensions.available, ...extensions.installed])].sort();
  printTable(
    ctx,
    ["extension", "available", "installed"],
    names.map((name) => [name, extensions.available.includes(name) ? "yes" : "no", installed.has(name) ? "yes" : "no"]),
    extensions,
  );
}
