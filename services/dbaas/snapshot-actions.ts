/**
 * The snapshot routes (README "Snapshots and branches"): taken under /api/databases/:id, read and
 * deleted under /api/snapshots, a second REST base of dbaas (lib/service-routes.ts knows it, so the
 * gateway answers 503 for it while dbaas is down). Handlers hand over to snapshotter.ts.
 */
import type { Context, ServiceActionsSchema, ServiceMethods } from "moleculer";
import { apiError, notFound } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
import { isUuid } from "../../lib/uuid";
import { Message, Snapshot, SnapshotDetail, SnapshotList } from "./contract";
import { roundMb } from "./databases.repository";
import type { DbaasThis } from "./dbaas.service";
import { MIB } from "./quota";
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
export async function findOwnSnapshot(service: DbaasThis, id: unknown, clientId: string): Promise<SnapshotRow> {
  const row = typeof id === "string" && isUuid(id) ? await service.snapshots.findOwned(id, clientId) : undefined;
  if (!row) throw notFound("Snapshot");
  return row;
}

const idParam = { id: { type: "string" } };

/**
 * What fills a branch: the caller's ready snapshot `snapshotId`, restored as the new database's
 * own role. 404 for a snapshot not the caller's, 409 while it is not ready, 503 without the tools.
 */
export async function branchRestore(
  service: DbaasThis,
  snapshotId: string,
  clientId: string,
): Promise<(names: { databaseName: string; username: string }, password: string) => Promise<void>> {
  const snapshot = await findOwnSnapshot(service, snapshotId, clientId);
  if (snapshot.status !== "ready") throw apiError("INVALID_STATE", `The snapshot is ${snapshot.status}: only a ready snapshot can be branched from`);
  await service.requireSnapshots();
  return (names, password) => {
    const url = new URL(service.tenant.adminUrl);
    url.username = names.username;
    url.password = password;
    return service.snapshotter.restore(snapshot.id, url.toString(), names.databaseName);
  };
}

export const snapshotActions: ServiceActionsSchema = {
  createSnapshot: {
    rest: "POST /:id/snapshots",
    auth: "required",
    openapi: {
      tag: "databases",
      summary: "Take a snapshot (pg_dump) of the database",
      description: "Answers at once with status pending; the snapshot becomes ready or failed. It outlives the database until deleted.",
      status: 202,
      response: Snapshot,
      errors: ["NOT_FOUND", "INVALID_STATE", "QUOTA_EXCEEDED", "SERVICE_UNAVAILABLE"],
    },
    params: { $$strict: "remove", ...idParam },
    async handler(
      this: DbaasThis,
      ctx: Context<{ id: string }, CallerMeta & { $statusCode?: number; $responseHeaders?: Record<string, string> }>,
    ): Promise<SnapshotDetail> {
      const db = await this.findReady(ctx);
      await this.requireSnapshots();
      const row = await this.snapshotter.start(db);
      ctx.meta.$statusCode = 202;
      ctx.meta.$responseHeaders = { Location: `/api${SNAPSHOTS_BASE}/${row.id}` }; // moleculer-web sets $location on 201 only
      return snapshotDetail(row);
    },
  },

  listSnapshots: {
    rest: { method: "GET", basePath: SNAPSHOTS_BASE, path: "/" },
    auth: "required",
    openapi: { tag: "databases", summary: "The caller's snapshots, newest first", status: 200, response: SnapshotList },
    params: { $$strict: "remove" },
    async handler(this: DbaasThis, ctx: Context<unknown, CallerMeta>): Promise<{ snapshots: SnapshotDetail[] }> {
      return { snapshots: (await this.snapshots.list(ctx.meta.caller!.clientId)).map(snapshotDetail) };
    },
  },

  getSnapshot: {
    rest: { method: "GET", basePath: SNAPSHOTS_BASE, path: "/:id" },
    auth: "required",
    openapi: { tag: "databases", summary: "One snapshot", status: 200, response: Snapshot, errors: ["NOT_FOUND"] },
    params: { $$strict: "remove", ...idParam },
    async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<SnapshotDetail> {
      return snapshotDetail(await findOwnSnapshot(this, ctx.params.id, ctx.meta.caller!.clientId));
    },
  },

  deleteSnapshot: {
    rest: { method: "DELETE", basePath: SNAPSHOTS_BASE, path: "/:id" },
    auth: "required",
    openapi: {
      tag: "databases",
      summary: "Delete a snapshot and its dump",
      status: 200,
      response: Message,
      errors: ["NOT_FOUND", "INVALID_STATE"],
    },
    params: { $$strict: "remove", ...idParam },
    async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<Message> {
      const clientId = ctx.meta.caller!.clientId;
      const row = await findOwnSnapshot(this, ctx.params.id, clientId);
      if (row.status === "pending") throw apiError("INVALID_STATE", "The snapshot is still being taken; delete it once it is ready or failed");
      if (!(await this.snapshotter.delete(row.id, clientId))) throw notFound("Snapshot");
      return { message: `Snapshot ${row.id} deleted` };
    },
  },

  /** Internal: each account's ready snapshots' bytes, which count in its storage (usage reads them; none: absent). */
  snapshotStorage: {
    visibility: "public",
    callers: ["usage"],
    params: { clientIds: { type: "array", items: "uuid", min: 1, max: 1000 } },
    async handler(this: DbaasThis, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, { bytes: number; storageMb: number }>> {
      const bytes = await this.snapshots.accountBytes(ctx.params.clientIds);
      return Object.fromEntries([...bytes].map(([id, b]) => [id, { bytes: b, storageMb: b / MIB }]));
    },
  },
};

export const snapshotMethods: ServiceMethods = {
  /** 503 when the tools cannot serve the tenant server (said once in the log at start). */
  async requireSnapshots(this: DbaasThis): Promise<void> {
    this.snapshotsBlocked ??= this.snapshotter.checkTools().then((reason) => {
      if (reason) this.logger.error(`Snapshots and branches refused: ${reason}`);
      return reason;
    });
    // A server that could not be reached is asked again next time.
    const reason = await this.snapshotsBlocked.catch((err) => {
      this.snapshotsBlocked = undefined;
      throw err;
    });
    if (reason) throw apiError("SERVICE_UNAVAILABLE", "Snapshots are not available on this platform right now (the operator is told why in the dbaas log)");
  },
};
