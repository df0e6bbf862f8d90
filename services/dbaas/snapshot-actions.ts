/**
 * The snapshot routes (README "Snapshots and branches"): taken under /api/databases/:id, read and
 * deleted under /api/snapshots, a second REST base of dbaas (lib/service-routes.ts knows it, so the
 * gateway answers 503 for it while dbaas is down). Each handler hands over to a function below,
 * which works with snapshotter.ts on the app (app.ts).
 */
import type { Context, ServiceActionsSchema } from "moleculer";
import { apiError, notFound } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
import { isUuid } from "../../lib/uuid";
import type { DbaasApp, WithApp } from "./app";
import { Message, Snapshot, SnapshotDetail, SnapshotList } from "./contract";
import { roundMb } from "./databases.repository";
import { findReady } from "./lookups";
import { MIB } from "./quota-rules";
import type { SnapshotRow } from "./snapshots.repository";

export const SNAPSHOTS_BASE = "/snapshots";

export function snapshotDetail(row: SnapshotRow): SnapshotDetail {
  return {
    id: row.id,
    databaseId: row.database_id,
    databaseName: row.database_name,
    status: row.status,
    sizeMb: roundMb(Number(row.size_bytes ?? 0) / MIB),
    createdAt: row.created_at.toISOString(),
  };
}

/** The caller's snapshot; a malformed id or another account's is 404. */
export async function findOwnSnapshot(app: DbaasApp, id: unknown, clientId: string): Promise<SnapshotRow> {
  const row = typeof id === "string" && isUuid(id) ? await app.snapshots.findOwned(id, clientId) : undefined;
  if (!row) throw notFound("Snapshot");
  return row;
}

const idParam = { id: { type: "string" } };

/**
 * What fills a branch: the caller's ready snapshot `snapshotId`, restored as the new database's
 * own role. 404 for a snapshot not the caller's, 409 while it is not ready, 503 without the tools.
 */
export async function branchRestore(
  app: DbaasApp,
  snapshotId: string,
  clientId: string,
): Promise<(names: { databaseName: string; username: string }, password: string) => Promise<void>> {
  const snapshot = await findOwnSnapshot(app, snapshotId, clientId);
  if (snapshot.status !== "ready") throw apiError("INVALID_STATE", `The snapshot is ${snapshot.status}: only a ready snapshot can be branched from`);
  await app.requireSnapshots();
  return (names, password) => {
    const url = new URL(app.tenant.adminUrl);
    url.username = names.username;
    url.password = password;
    return app.snapshotter.restore(snapshot.id, url.toString(), names.databaseName);
  };
}

export const snapshotActions: ServiceActionsSchema = {
  createSnapshot: {
    rest: "POST /:id/snapshots",
    auth: "required",
    scope: "databases:write",
    openapi: {
      tag: "databases",
      summary: "Take a snapshot (pg_dump) of the database",
      description: "Answers at once with status pending; the snapshot becomes ready or failed. It outlives the database until deleted.",
      status: 202,
      response: Snapshot,
      errors: ["NOT_FOUND", "INVALID_STATE", "QUOTA_EXCEEDED", "SERVICE_UNAVAILABLE"],
    },
    params: { $$strict: "remove", ...idParam },
    async handler(this: WithApp, ctx: Context<{ id: string }, SnapshotMeta>): Promise<SnapshotDetail> {
      return startSnapshot(this.app, ctx.params.id, ctx.meta);
    },
  },

  listSnapshots: {
    rest: { method: "GET", basePath: SNAPSHOTS_BASE, path: "/" },
    auth: "required",
    scope: "databases:read",
    openapi: { tag: "databases", summary: "The caller's snapshots, newest first", status: 200, response: SnapshotList },
    params: { $$strict: "remove" },
    async handler(this: WithApp, ctx: Context<unknown, CallerMeta>): Promise<{ snapshots: SnapshotDetail[] }> {
      return listSnapshots(this.app, ctx.meta.caller!.clientId);
    },
  },

  getSnapshot: {
    rest: { method: "GET", basePath: SNAPSHOTS_BASE, path: "/:id" },
    auth: "required",
    scope: "databases:read",
    openapi: { tag: "databases", summary: "One snapshot", status: 200, response: Snapshot, errors: ["NOT_FOUND"] },
    params: { $$strict: "remove", ...idParam },
    async handler(this: WithApp, ctx: Context<{ id: string }, CallerMeta>): Promise<SnapshotDetail> {
      return snapshotDetail(await findOwnSnapshot(this.app, ctx.params.id, ctx.meta.caller!.clientId));
    },
  },

  deleteSnapshot: {
    rest: { method: "DELETE", basePath: SNAPSHOTS_BASE, path: "/:id" },
    auth: "required",
    scope: "databases:write",
    openapi: {
      tag: "databases",
      summary: "Delete a snapshot and its dump",
      status: 200,
      response: Message,
      errors: ["NOT_FOUND", "INVALID_STATE"],
    },
    params: { $$strict: "remove", ...idParam },
    async handler(this: WithApp, ctx: Context<{ id: string }, CallerMeta>): Promise<Message> {
      return deleteSnapshot(this.app, ctx.params.id, ctx.meta.caller!.clientId);
    },
  },

  /** Internal: each account's ready snapshots' bytes, which count in its storage (usage reads them; none: absent). */
  snapshotStorage: {
    visibility: "public",
    callers: ["usage"],
    params: { clientIds: { type: "array", items: "uuid", min: 1, max: 1000 } },
    async handler(this: WithApp, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, { bytes: number; storageMb: number }>> {
      return snapshotStorage(this.app, ctx.params.clientIds);
    },
  },
};

type SnapshotMeta = CallerMeta & { $statusCode?: number; $responseHeaders?: Record<string, string> };

/** Answers 202 at once with the pending snapshot; the dump runs in the background (snapshotter.ts). */
export async function startSnapshot(app: DbaasApp, id: string, meta: SnapshotMeta): Promise<SnapshotDetail> {
  const db = await findReady(app, id, meta.caller!.clientId);
  await app.requireSnapshots();
  const row = await app.snapshotter.start(db);
  meta.$statusCode = 202;
  meta.$responseHeaders = { Location: `/api${SNAPSHOTS_BASE}/${row.id}` }; // moleculer-web sets $location on 201 only
  return snapshotDetail(row);
}

export async function listSnapshots(app: DbaasApp, clientId: string): Promise<{ snapshots: SnapshotDetail[] }> {
  return { snapshots: (await app.snapshots.list(clientId)).map(snapshotDetail) };
}

export async function deleteSnapshot(app: DbaasApp, id: string, clientId: string): Promise<Message> {
  const row = await findOwnSnapshot(app, id, clientId);
  if (row.status === "pending") throw apiError("INVALID_STATE", "The snapshot is still being taken; delete it once it is ready or failed");
  if (!(await app.snapshotter.delete(row.id, clientId))) throw notFound("Snapshot");
  return { message: `Snapshot ${row.id} deleted` };
}

/** Each account's ready snapshots' bytes, which count in its storage (none: absent). */
export async function snapshotStorage(app: DbaasApp, clientIds: string[]): Promise<Record<string, { bytes: number; storageMb: number }>> {
  const bytes = await app.snapshots.accountBytes(clientIds);
  return Object.fromEntries([...bytes].map(([id, b]) => [id, { bytes: b, storageMb: b / MIB }]));
}
