/**
 * gpu-scheduler's internal actions behind the operators' routes (services/admin): nodes with
 * their state, drain and resume, every account's jobs, cancel of any job. Called by the admin
 * service only (`callers`), and only for an administrator (`auth`, from the signed caller token).
 */
import type { Context, ServiceSchema } from "moleculer";
import { apiError, notFound, validationFailed } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
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
} from "./admin-contract";
import type { SchedulerThis } from "./gpu-scheduler.service";
import type { JobRow } from "./jobs.repository";
import { adminNodes } from "./node-admin";

/** Operators see real node ids, in the detail's messages too. */
const realIds = (nodeId: string) => nodeId;
/** The statusReason of a job an operator cancelled. */
export const ADMIN_CANCEL_REASON = "cancelled by an administrator";

type AdminCtx<P> = Context<P, CallerMeta>;
type AdminSchedulerThis = SchedulerThis & {
  adminNode(nodeId: string): Promise<AdminNodeView>;
  adminJobs(rows: JobRow[]): Promise<AdminJobView[]>;
  setDraining(ctx: AdminCtx<NodeIdParams>, draining: boolean): Promise<AdminNodeView>;
};

const internal = { visibility: "public", callers: ["admin"], auth: "admin" } as const;

export const AdminActionsMixin: Partial<ServiceSchema> = {
  actions: {
    adminNodes: {
      ...internal,
      async handler(this: AdminSchedulerThis): Promise<{ nodes: AdminNodeView[] }> {
        const [rows, running, held] = await Promise.all([this.nodeBook.all(), this.nodeBook.runningByNode(), this.places.heldCards()]);
        return { nodes: adminNodes(this.scheduler.view.nodeEntries(), rows, running, held, this.labeler) };
      },
    },

    adminDrainNode: {
      ...internal,
      params: NODE_ID_PARAMS,
      handler(this: AdminSchedulerThis, ctx: AdminCtx<NodeIdParams>): Promise<AdminNodeView> {
        return this.setDraining(ctx, true);
      },
    },

    adminResumeNode: {
      ...internal,
      params: NODE_ID_PARAMS,
      async handler(this: AdminSchedulerThis, ctx: AdminCtx<NodeIdParams>): Promise<AdminNodeView> {
        const node = await this.setDraining(ctx, false);
        void this.scheduler.schedule(); // its cards may take queued jobs now (other replicas: on their next pass)
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
      async handler(this: AdminSchedulerThis, ctx: AdminCtx<AcceptCardsParams>): Promise<AdminNodeView> {
        const { nodeId, uuids } = ctx.params;
        const node = this.scheduler.view.node(nodeId);
        if (!node) throw apiError("NOT_FOUND", "GPU node not found, or not heard now: cards are accepted while their node announces them");
        const pending = node.held.filter((c) => c.reason === "pending");
        const unknown = (uuids ?? []).filter((u) => !pending.some((c) => c.uuid === u));
        if (unknown.length)
          throw validationFailed([
            { field: "uuids", message: `Not pending cards of ${nodeId}: ${unknown.join(", ")}. Pending: ${pending.map((c) => c.uuid).join(", ") || "none"}.` },
          ]);
        const chosen = uuids ? pending.filter((c) => uuids.includes(c.uuid)) : pending;
        if (chosen.length) await this.scheduler.acceptCards(nodeId, chosen, ctx.meta.caller!.clientId);
        return this.adminNode(nodeId);
      },
    },

    adminJobs: {
      ...internal,
      params: ADMIN_JOBS_PARAMS,
      async handler(this: AdminSchedulerThis, ctx: AdminCtx<AdminJobsParams>): Promise<{ jobs: AdminJobView[]; nextCursor: string | null }> {
        const { status, clientId, before } = ctx.params;
        const page = await this.jobSearch.search({ status, clientId, before, limit: ctx.params.limit ?? ADMIN_LIST_MAX });
        return { jobs: await this.adminJobs(page.rows), nextCursor: page.nextCursor };
      },
    },

    adminCancelJob: {
      ...internal,
      params: { id: { type: "uuid" } },
      async handler(this: AdminSchedulerThis, ctx: AdminCtx<{ id: string }>): Promise<AdminJobView> {
        const row = await this.repo.find(ctx.params.id);
        if (!row) throw notFound("GPU job");
        if (!(await this.scheduler.cancel(row, ADMIN_CANCEL_REASON)))
          throw apiError("INVALID_STATE", `GPU job already finished (${row.status}); it cannot be cancelled`);
        return (await this.adminJobs([(await this.repo.find(row.id))!]))[0];
      },
    },
  },

  methods: {
    /** Known nodes only: heard by this replica, or drained or lost before (RunPod and Slurm drain known nodes only). */
    async setDraining(this: AdminSchedulerThis, ctx: AdminCtx<NodeIdParams>, draining: boolean): Promise<AdminNodeView> {
      const { nodeId } = ctx.params;
      if (!this.scheduler.view.has(nodeId) && !(await this.nodeBook.find(nodeId))) throw notFound("GPU node");
      await this.nodeBook.setDraining(nodeId, draining, ctx.meta.caller!.clientId, this.clock.now());
      return this.adminNode(nodeId);
    },

    async adminNode(this: AdminSchedulerThis, nodeId: string): Promise<AdminNodeView> {
      const [row, running, held] = await Promise.all([this.nodeBook.find(nodeId), this.nodeBook.runningByNode(), this.places.heldCards()]);
      const heard = this.scheduler.view.node(nodeId);
      const [node] = adminNodes(heard ? [heard] : [], row ? [row] : [], running, held, this.labeler);
      if (!node) throw notFound("GPU node");
      return node;
    },

    /** Details as clients see them (real node ids in messages), plus the account and the node. */
    async adminJobs(this: AdminSchedulerThis, rows: JobRow[]): Promise<AdminJobView[]> {
      return (await this.details(rows, realIds)).map((detail, i) => ({ ...detail, clientId: rows[i].client_id, nodeId: rows[i].node_id }));
    },
  },
};
