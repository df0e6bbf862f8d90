/**
 * The operator's view of the GPU cluster (routes /api/admin/nodes and /api/admin/jobs, served by
 * the admin service and answered by gpu-scheduler's internal admin actions): params and responses.
 */
import { Nullable, type Static, StringEnum, Type } from "../../lib/contract";
import { Gpu, Job, JobStatus } from "./contract";

/** A node id as the bus names it (`gpu-node.<name>`, or a development id). */
export const NODE_ID_PARAMS = { nodeId: { type: "string", min: 1, max: 200, pattern: "^[A-Za-z0-9_.-]+$" } };
export type NodeIdParams = { nodeId: string };

/** The most cards one acceptance may name (a host holds far fewer). */
export const ACCEPT_CARDS_MAX = 64;
/** POST /api/admin/nodes/:nodeId/cards/accept: `uuids` names the pending cards to accept (absent: all of them). */
export const ACCEPT_CARDS_PARAMS = {
  $$strict: true,
  ...NODE_ID_PARAMS,
  uuids: { type: "array", optional: true, min: 1, max: ACCEPT_CARDS_MAX, items: { type: "string", min: 1, max: 200 } },
};
export type AcceptCardsParams = NodeIdParams & { uuids?: string[] };

export const ADMIN_LIST_MAX = 50;
export const ADMIN_JOBS_PARAMS = {
  $$strict: "remove",
  status: { type: "enum", values: ["queued", "running", "completed", "failed", "cancelled"], optional: true },
  clientId: { type: "uuid", optional: true },
  limit: { type: "number", integer: true, min: 1, max: ADMIN_LIST_MAX, optional: true, convert: true },
  /** `nextCursor` of the page before. */
  before: { type: "string", max: 18, pattern: "^[0-9]+$", optional: true },
};
export type AdminJobsParams = { status?: Static<typeof JobStatus>; clientId?: string; limit?: number; before?: string };

export const NodeState = StringEnum(["ready", "draining", "lost"], { $id: "NodeState" });
export type NodeState = Static<typeof NodeState>;

/** A card as clients see it (contract.ts Gpu), less what the node entry says, plus whether a job holds it. */
export const AdminCard = Type.Composite([Type.Omit(Gpu, ["available", "nodeId"]), Type.Object({ busy: Type.Boolean({ description: "A job holds it" }) })]);
/** A card the node announces that takes no job. */
export const HeldAdminCard = Type.Omit(Gpu, ["available", "nodeId"]);

export const AdminNode = Type.Object(
  {
    id: Type.String({ description: "The node's real id on the bus (gpu-node.<name>), as operators configured it" }),
    label: Type.String({ description: "The opaque label clients see for this node (node-<hmac8>)" }),
    state: NodeState,
    cards: Type.Array(AdminCard, {
      description: "The cards that take jobs, as its last heartbeat reported them (accepted, within GPU_NODE_CARDS); empty for a lost node",
    }),
    pendingCards: Type.Array(HeldAdminCard, {
      description:
        "Cards it announces that differ from those it registered first or an administrator accepted (new uuid, other name or memory): no job goes there until accepted",
    }),
    disallowedCards: Type.Array(HeldAdminCard, {
      description: "Accepted cards beyond its GPU_NODE_CARDS allowance, and repeats of a uuid it already announced at a lower index: no job goes there",
    }),
    runningJobs: Type.Array(Type.String(), { description: "Ids of the jobs placed or running on it" }),
    lastSeenAt: Nullable(Type.String({ format: "date-time", description: "Its last heartbeat this scheduler replica heard; null when none" })),
    drainedAt: Nullable(Type.String({ format: "date-time" })),
    drainedBy: Nullable(Type.String({ description: "The administrator's client id" })),
    lostAt: Nullable(Type.String({ format: "date-time", description: "When the scheduler last declared it lost" })),
  },
  { $id: "AdminNode" },
);
export type AdminNodeView = Static<typeof AdminNode>;
export const AdminNodeList = Type.Object({ nodes: Type.Array(AdminNode) }, { $id: "AdminNodeList" });

export const AdminJob = Type.Composite(
  [
    Job,
    Type.Object({
      clientId: Type.String({ description: "The account that submitted it" }),
      nodeId: Nullable(Type.String({ description: "The real id of the node it was placed on; null until placed" })),
    }),
  ],
  { $id: "AdminJob" },
);
export type AdminJobView = Static<typeof AdminJob>;
export const AdminJobList = Type.Object(
  {
    jobs: Type.Array(AdminJob, { maxItems: ADMIN_LIST_MAX }),
    nextCursor: Nullable(Type.String({ description: "Pass as `before` for the next (older) page; null on the last page" })),
  },
  { $id: "AdminJobList" },
);

/** gpu-scheduler's internal actions behind the admin routes (callers: the admin service only). */
export const SCHEDULER_ADMIN_ACTIONS = {
  nodes: "gpu-scheduler.adminNodes",
  drain: "gpu-scheduler.adminDrainNode",
  resume: "gpu-scheduler.adminResumeNode",
  jobs: "gpu-scheduler.adminJobs",
  cancel: "gpu-scheduler.adminCancelJob",
  acceptCards: "gpu-scheduler.adminAcceptNodeCards",
} as const;
