/**
 * gpu-scheduler's internal actions behind the operators' routes (services/admin): nodes with
 * their state, drain and resume, every account's jobs, cancel of any job. Called by the admin
 * service only (`callers`), and only for an administrator (`auth`, from the signed caller token).
 */
import type { Context, ServiceSchema } from "moleculer";
import { apiError, notFound, validationFailed } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import {
  ACCEPT_CARDS_PARAMS,
  AcceptCardsParams,
  ADMIN_JOBS_PARAMS,
  ADMIN_LIST_MAX,
  AdminJobsParams,
  AdminJobView,
  AdminNodeView,
  NODE_ID_PARAMS,
  NodeIdParams,
} from "../admin-contract";
import type { SchedulerApp, SchedulerService } from "../app";
import type { JobRow } from "../store/job-row";
import { adminNodes } from "./node-admin";

/** Operators see real node ids, in the detail's messages too. */
const realIds = (nodeId: string) => nodeId;
/** The statusReason of a job an operator cancelled. */
export const ADMIN_CANCEL_REASON = "cancelled by an administrator";

type AdminCtx<P> = Context<P, CallerMeta>;

const internal = { visibility: "public", callers: ["admin"], auth: "admin" } as const;

export const AdminActionsMixin: Partial<ServiceSchema> = {
  actions: {
    adminNodes: {
      ...internal,
      async handler(this: SchedulerService): Promise<{ nodes: AdminNodeView[] }> {
        const { nodeBook, places, scheduler, labeler } = this.app;
        const [rows, running, held] = await Promise.all([nodeBook.all(), nodeBook.runningByNode(), places.heldCards()]);
        return { nodes: adminNodes(scheduler.view.nodeEntries(), rows, running, held, labeler) };
      },
    },

    adminDrainNode: {
      ...internal,
      params: NODE_ID_PARAMS,
      handler(this: SchedulerService, ctx: AdminCtx<NodeIdParams>): Promise<AdminNodeView> {
        return setDraining(this.app, ctx, true);
      },
    },

    adminResumeNode: {
      ...internal,
      params: NODE_ID_PARAMS,
      async handler(this: SchedulerService, ctx: AdminCtx<NodeIdParams>): Promise<AdminNodeView> {
        const node = await setDraining(this.app, ctx, false);
        void this.app.scheduler.schedule(); // its cards may take queued jobs now (other replicas: on their next pass)
        return node;
      },
    },

    /**
     * Accepts pending cards of a node heard now (all, or those `uuids` names): they take jobs from
     * now on, on every replica (each reads the stored pins at the node's next heartbeat).
     */
    adminAcceptNodeCards: {
      ...internal,
      params: ACCEPT_CARDS_PARAMS,
      async handler(this: SchedulerService, ctx: AdminCtx<AcceptCardsParams>): Promise<AdminNodeView> {
        const { nodeId, uuids } = ctx.params;
        const node = this.app.scheduler.view.node(nodeId);
        if (!node) throw apiError("NOT_FOUND", "GPU node not found, or not heard now: cards are accepted while their node announces them");
        const pending = node.held.filter((c) => c.reason === "pending");
        const unknown = (uuids ?? []).filter((u) => !pending.some((c) => c.uuid === u));
        if (unknown.length)
          throw validationFailed([
            { field: "uuids", message: `Not pending cards of ${nodeId}: ${unknown.join(", ")}. Pending: ${pending.map((c) => c.uuid).join(", ") || "none"}.` },
          ]);
        const chosen = uuids ? pending.filter((c) => uuids.includes(c.uuid)) : pending;
        if (chosen.length) await this.app.scheduler.acceptCards(nodeId, chosen, ctx.meta.caller!.clientId);
        return adminNode(this.app, nodeId);
      },
    },

    adminJobs: {
      ...internal,
      params: ADMIN_JOBS_PARAMS,
      async handler(this: SchedulerService, ctx: AdminCtx<AdminJobsParams>): Promise<{ jobs: AdminJobView[]; nextCursor: string | null }> {
        const { status, clientId, before } = ctx.params;
        const page = await this.app.jobSearch.search({ status, clientId, before, limit: ctx.params.limit ?? ADMIN_LIST_MAX });
        return { jobs: await adminJobs(this.app, page.rows), nextCursor: page.nextCursor };
      },
    },

    adminCancelJob: {
      ...internal,
      params: { id: { type: "uuid" } },
      async handler(this: SchedulerService, ctx: AdminCtx<{ id: string }>): Promise<AdminJobView> {
        const { repo, scheduler } = this.app;
        const row = await repo.find(ctx.params.id);
        if (!row) throw notFound("GPU job");
        if (!(await scheduler.cancel(row, ADMIN_CANCEL_REASON)))
          throw apiError("INVALID_STATE", `GPU job already finished (${row.status}); it cannot be cancelled`);
        return (await adminJobs(this.app, [(await repo.find(row.id))!]))[0];
      },
    },
  },
};

/** Known nodes only: heard by this replica, or drained or lost before (RunPod and Slurm drain known nodes only). */
async function setDraining(app: SchedulerApp, ctx: AdminCtx<NodeIdParams>, draining: boolean): Promise<AdminNodeView> {
  const { nodeId } = ctx.params;
  if (!app.scheduler.view.has(nodeId) && !(await app.nodeBook.find(nodeId))) throw notFound("GPU node");
  await app.nodeBook.setDraining(nodeId, draining, ctx.meta.caller!.clientId, app.clock.now());
  return adminNode(app, nodeId);
}

async function adminNode(app: SchedulerApp, nodeId: string): Promise<AdminNodeView> {
  const [row, running, held] = await Promise.all([app.nodeBook.find(nodeId), app.nodeBook.runningByNode(), app.places.heldCards()]);
  const heard = app.scheduler.view.node(nodeId);
  const [node] = adminNodes(heard ? [heard] : [], row ? [row] : [], running, held, app.labeler);
  if (!node) throw notFound("GPU node");
  return node;
}

/** Details as clients see them (real node ids in messages), plus the account and the node. */
async function adminJobs(app: SchedulerApp, rows: JobRow[]): Promise<AdminJobView[]> {
  return (await app.reader.details(rows, realIds)).map((detail, i) => ({ ...detail, clientId: rows[i].client_id, nodeId: rows[i].node_id }));
}
