/**
 * admin: the operators' API under /api/admin (role `admin`, from ADMIN_EMAILS). Every handler
 * hands over to the internal action of the service that owns the resource (which accepts calls
 * from this service only, and checks the admin role again from the signed caller token); the
 * hooks write the audit trail of every action in one place (audit.ts).
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { ADMIN_ROLE, type CallerMeta } from "../../lib/identity";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import {
  ACCEPT_CARDS_PARAMS,
  ADMIN_JOBS_PARAMS,
  AdminJob,
  AdminJobList,
  AdminNode,
  AdminNodeList,
  NODE_ID_PARAMS,
  SCHEDULER_ADMIN_ACTIONS,
} from "../gpu-scheduler/admin-contract";
import { AuditRepository, auditEntry, auditLine } from "./audit";
import { OVERRIDE_PARAMS } from "../usage/usage.service";
import { Type } from "../../lib/contract";
import { migrations } from "./migrations";

type AdminThis = Service & DbThis & { audit: AuditRepository; recordAudit(ctx: Context<unknown, CallerMeta>, err?: unknown): Promise<void> };

/** The one-line handler of an admin route: the owning service's internal action, with the same params and caller. */
const handOver = (action: string) => (ctx: Context<Record<string, unknown>, CallerMeta>) => ctx.call(action, ctx.params);

const JOB_ID_PARAMS = { id: { type: "uuid" } };

const AdminService: ServiceSchema<ServiceSettingSchema, AdminThis> = {
  name: "admin",
  mixins: [DbMixin({ schema: "admin", migrations, poolSize: 2 })],

  settings: {
    rest: "/admin",
  },

  hooks: {
    after: {
      async "*"(this: AdminThis, ctx: Context<unknown, CallerMeta>, res: unknown) {
        await this.recordAudit(ctx);
        return res;
      },
    },
    error: {
      async "*"(this: AdminThis, ctx: Context<unknown, CallerMeta>, err: unknown) {
        await this.recordAudit(ctx, err);
        throw err;
      },
    },
  },

  actions: {
    nodes: {
      rest: "GET /nodes",
      auth: "admin",
      openapi: { tag: "admin", summary: "Every gpu-node with its state (ready, draining, lost), cards and running jobs", status: 200, response: AdminNodeList },
      handler: handOver(SCHEDULER_ADMIN_ACTIONS.nodes),
    },

    drainNode: {
      rest: "POST /nodes/:nodeId/drain",
      auth: "admin",
      openapi: {
        tag: "admin",
        summary: "Drain a node: it starts no new job; its running jobs finish",
        description: "Known nodes only (heard by the scheduler, or drained or lost before): another id is 404. Draining a draining node changes nothing.",
        status: 200,
        response: AdminNode,
        errors: ["NOT_FOUND"],
      },
      params: NODE_ID_PARAMS,
      handler: handOver(SCHEDULER_ADMIN_ACTIONS.drain),
    },

    resumeNode: {
      rest: "POST /nodes/:nodeId/resume",
      auth: "admin",
      openapi: { tag: "admin", summary: "Resume a drained node: it takes new jobs again", status: 200, response: AdminNode, errors: ["NOT_FOUND"] },
      params: NODE_ID_PARAMS,
      handler: handOver(SCHEDULER_ADMIN_ACTIONS.resume),
    },

    acceptNodeCards: {
      rest: "POST /nodes/:nodeId/cards/accept",
      auth: "admin",
      openapi: {
        tag: "admin",
        summary: "Accept a node's pending cards (those that differ from what it registered first): jobs may go to them from now on",
        description:
          'Body (optional): `{ "uuids": [...] }` names the pending cards to accept; absent, all of them. A uuid that is not a pending card of the node is 400 and nothing is accepted. ' +
          "A node not heard now is 404. Cards beyond the operator's GPU_NODE_CARDS stay unused whatever is accepted.",
        status: 200,
        response: AdminNode,
        errors: ["NOT_FOUND", "VALIDATION_FAILED"],
      },
      params: ACCEPT_CARDS_PARAMS,
      handler: handOver(SCHEDULER_ADMIN_ACTIONS.acceptCards),
    },

    jobs: {
      rest: "GET /jobs",
      auth: "admin",
      openapi: {
        tag: "admin",
        summary:
          "Every account's GPU jobs, newest first, filtered by `status` and `clientId`; `limit` (default and most 50), `before` = `nextCursor` for older ones",
        status: 200,
        response: AdminJobList,
      },
      params: ADMIN_JOBS_PARAMS,
      handler: handOver(SCHEDULER_ADMIN_ACTIONS.jobs),
    },

    accounts: {
      rest: "GET /accounts",
      auth: "admin",
      openapi: {
        tag: "admin",
        summary: "Every account with its usage this month, its quotas and overrides; `limit` (default 50), `after` = `nextCursor`",
        status: 200,
        response: Type.Object({}, { additionalProperties: true }),
      },
      params: {
        $$strict: "remove",
        after: { type: "uuid", optional: true },
        limit: { type: "number", integer: true, min: 1, max: 200, optional: true, convert: true },
      },
      handler: handOver("usage.adminAccounts"),
    },

    setAccountQuotas: {
      rest: "PUT /accounts/:id/quotas",
      auth: "admin",
      openapi: {
        tag: "admin",
        summary:
          "Override an account's quotas (credits, gpuSeconds, tokens, databases, storageMb, runningGpus, queuedJobs, requestsPerMinute, tokensPerMinute, fairShareWeight; null: back to the default)",
        status: 200,
        response: Type.Object({}, { additionalProperties: true }),
        errors: ["NOT_FOUND"],
      },
      params: { $$strict: true, id: { type: "uuid" }, ...OVERRIDE_PARAMS },
      handler: handOver("usage.adminSetQuotas"),
    },

    cancelJob: {
      rest: "POST /jobs/:id/cancel",
      auth: "admin",
      openapi: {
        tag: "admin",
        summary: "Cancel any account's queued or running job (as the client's own cancel)",
        status: 200,
        response: AdminJob,
        errors: ["NOT_FOUND", "INVALID_STATE"],
      },
      params: JOB_ID_PARAMS,
      handler: handOver(SCHEDULER_ADMIN_ACTIONS.cancel),
    },
  },

  methods: {
    /**
     * The log line, then the row; a row that cannot be written is logged, never turns the answer
     * into an error. Only administrators' actions: the hooks also see requests the auth policy
     * refused (401/403), which must not let anyone fill the table.
     */
    async recordAudit(this: AdminThis, ctx: Context<unknown, CallerMeta>, err?: unknown): Promise<void> {
      if (ctx.meta.caller?.role !== ADMIN_ROLE) return;
      const entry = auditEntry(ctx.action?.name ?? "admin.?", ctx.meta.caller?.clientId, ctx.params, err);
      this.logger.info(auditLine(entry));
      await this.audit.record(entry).catch((e) => this.logger.error(`Audit row not written (${(e as Error).message}): ${auditLine(entry)}`));
    },
  },

  created(this: AdminThis) {
    this.audit = new AuditRepository(this.db);
  },
};

export default AdminService;
