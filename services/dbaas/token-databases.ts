/**
 * A restricted token's database allow-list (lib/identity.ts TokenLimits.databases), as hooks on
 * the dbaas actions: a database outside it is 404, as another account's is (existence is not
 * leaked), and so is a snapshot of one; lists leave them out. A JWT, an API key or a token without a
 * list passes unchanged.
 */
import type { Context } from "moleculer";
import { notFound } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
import type { DbaasApp } from "./app";
import type { DatabaseDetail, SnapshotDetail } from "./contract";
import { findOwnSnapshot } from "./snapshot-actions";

type Ctx = Context<{ id?: unknown; fromSnapshot?: unknown }, CallerMeta>;
type Host = { app: DbaasApp };

/** Whether the caller may see the database `id` (any id, for a caller without a list). */
export function databaseAllowed(meta: CallerMeta, id: unknown): boolean {
  const allowed = meta.caller?.token?.databases;
  return !allowed || (typeof id === "string" && allowed.includes(id.toLowerCase()));
}

async function checkSnapshot(this: Host, ctx: Ctx, id: unknown): Promise<void> {
  if (!ctx.meta.caller?.token?.databases) return;
  const snapshot = await findOwnSnapshot(this.app, id, ctx.meta.caller.clientId);
  if (!databaseAllowed(ctx.meta, snapshot.database_id)) throw notFound("Snapshot");
}

export const tokenDatabaseHooks = {
  before: {
    /** The actions whose `id` is a database. */
    "get|destroy|rotatePassword|createSnapshot"(ctx: Ctx) {
      if (!databaseAllowed(ctx.meta, ctx.params.id)) throw notFound("Database");
    },
    "getSnapshot|deleteSnapshot"(this: Host, ctx: Ctx) {
      return checkSnapshot.call(this, ctx, ctx.params.id);
    },
    /** A branch of a snapshot of a database outside the list is refused as that snapshot is. */
    create(this: Host, ctx: Ctx) {
      if (ctx.params.fromSnapshot !== undefined && ctx.params.fromSnapshot !== null) return checkSnapshot.call(this, ctx, ctx.params.fromSnapshot);
    },
  },
  after: {
    list(ctx: Ctx, res: { databases: DatabaseDetail[] }) {
      return { ...res, databases: res.databases.filter((d) => databaseAllowed(ctx.meta, d.id)) };
    },
    listSnapshots(ctx: Ctx, res: { snapshots: SnapshotDetail[] }) {
      return { ...res, snapshots: res.snapshots.filter((s) => databaseAllowed(ctx.meta, s.databaseId)) };
    },
  },
};
