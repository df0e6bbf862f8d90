/**
 * Restricted tokens' scopes, as data on every action: the table below names each action a token
 * could reach (auth "required") with the scope it needs, and each "jwt" or "admin" action (never a
 * token). A new action with a policy fails here until it is in the table with a scope; the decision
 * itself (tokenRefusal) is checked without a broker.
 */
import type { ActionSchema } from "moleculer";
import { policyOf, tokenRefusal } from "../../middlewares/auth.middleware";
import type { Caller } from "../../lib/identity";
import { scopeGranted, TOKEN_SCOPES } from "../../lib/scopes";
import { SERVICE_REGISTRY } from "../../moleculer.config";

const TOKEN_FREE = "jwt or admin: no token";

/** Every action with an auth policy other than "public", and what a token needs to call it. */
const EXPECTED: Record<string, string> = {
  "admin.nodes": TOKEN_FREE,
  "admin.drainNode": TOKEN_FREE,
  "admin.resumeNode": TOKEN_FREE,
  "admin.acceptNodeCards": TOKEN_FREE,
  "admin.jobs": TOKEN_FREE,
  "admin.accounts": TOKEN_FREE,
  "admin.setAccountQuotas": TOKEN_FREE,
  "admin.cancelJob": TOKEN_FREE,
  "auth.me": "any",
  "auth.createApiKey": TOKEN_FREE,
  "auth.createWebhookSecret": TOKEN_FREE,
  "auth.createToken": TOKEN_FREE,
  "auth.listTokens": "none",
  "auth.deleteToken": "none",
  "dbaas.create": "databases:write",
  "dbaas.list": "databases:read",
  "dbaas.get": "databases:read",
  "dbaas.destroy": "databases:write",
  "dbaas.rotatePassword": "databases:write",
  "dbaas.createSnapshot": "databases:write",
  "dbaas.listSnapshots": "databases:read",
  "dbaas.getSnapshot": "databases:read",
  "dbaas.deleteSnapshot": "databases:write",
  "gpu-scheduler.adminAcceptNodeCards": TOKEN_FREE,
  "gpu-scheduler.adminCancelJob": TOKEN_FREE,
  "gpu-scheduler.adminDrainNode": TOKEN_FREE,
  "gpu-scheduler.adminJobs": TOKEN_FREE,
  "gpu-scheduler.adminNodes": TOKEN_FREE,
  "gpu-scheduler.adminResumeNode": TOKEN_FREE,
  "gpu-scheduler.create": "jobs:write",
  "gpu-scheduler.list": "jobs:read",
  "gpu-scheduler.get": "jobs:read",
  "gpu-scheduler.cancel": "jobs:write",
  "gpu-scheduler.logs": "jobs:read",
  "gpu-scheduler.followPage": "jobs:read",
  "gpu-scheduler.followStop": "jobs:read",
  "gpu-scheduler.artifacts": "jobs:read",
  "gpu-scheduler.logsPage": "jobs:read",
  "gpu-scheduler.events": "jobs:read",
  "gpu-scheduler.eventsPage": "jobs:read",
  "gpu-scheduler.deliveries": "jobs:read",
  "gpu-scheduler.status": "jobs:read",
  "gpu-scheduler.array": "jobs:read",
  "gpu-scheduler.cancelArray": "jobs:write",
  "gpu-scheduler.createSchedule": "jobs:write",
  "gpu-scheduler.listSchedules": "jobs:read",
  "gpu-scheduler.getSchedule": "jobs:read",
  "gpu-scheduler.updateSchedule": "jobs:write",
  "gpu-scheduler.deleteSchedule": "jobs:write",
  "inference.infer": "inference",
  "inference.createDeployment": "jobs:write",
  "inference.listDeployments": "jobs:read",
  "inference.getDeployment": "jobs:read",
  "inference.deploymentRequests": "jobs:read",
  "inference.patchDeployment": "jobs:write",
  "inference.deleteDeployment": "jobs:write",
  "inference.v1Models": "inference",
  "inference.v1BatchesCancel": "inference",
  "inference.v1BatchesCreate": "inference",
  "inference.v1BatchesEvents": "inference",
  "inference.v1BatchesEventsPage": "inference",
  "inference.v1BatchesGet": "inference",
  "inference.v1BatchesList": "inference",
  "inference.v1ChatCompletions": "inference",
  "inference.v1Responses": "inference",
  "inference.v1Messages": "inference",
  "inference.v1Embeddings": "inference",
  "inference.v1FilesContent": "inference",
  "inference.v1FilesCreate": "inference",
  "inference.v1FilesDelete": "inference",
  "inference.v1FilesGet": "inference",
  "inference.v1FilesList": "inference",
  "metrics.gpuHistory": "jobs:read",
  "usage.summary": "usage:read",
  "usage.quotas": "usage:read",
  "usage.adminAccounts": TOKEN_FREE,
  "usage.adminSetQuotas": TOKEN_FREE,
};

function protectedActions(): Array<[string, ActionSchema]> {
  const out: Array<[string, ActionSchema]> = [];
  for (const [name, load] of Object.entries(SERVICE_REGISTRY)) {
    // The gateway's own actions (moleculer-web's listAliases) are not routed: the /api route's whitelist leaves them out.
    if (name === "api-gateway") continue;
    const schema = load();
    for (const s of [schema, ...((schema.mixins ?? []) as (typeof schema)[])])
      for (const [action, def] of Object.entries(s.actions ?? {})) {
        if (typeof def !== "object" || def === null) continue;
        const policy = policyOf(def as ActionSchema);
        if (policy && policy !== "public") out.push([`${name}.${action}`, def as ActionSchema]);
      }
  }
  return out;
}

const ID = "4b6f1c2e-0000-4000-8000-000000000001";
const tokenCaller = (scopes: string[], role = "client"): Caller =>
  ({ clientId: ID, role, via: "token", token: { id: ID, scopes, models: null, databases: null, jobId: null } }) as Caller;

describe("auth - restricted token scopes", () => {
  const actions = protectedActions();

  it("auth - every action a token could reach declares its scope, as the table says (a new route fails until it is added)", () => {
    const actual = Object.fromEntries(actions.map(([name, a]) => [name, policyOf(a) === "required" ? (a.scope ?? "MISSING") : TOKEN_FREE]));
    expect(actual).toEqual(EXPECTED);
  });

  it.each(actions.filter(([, a]) => policyOf(a) !== "required"))("auth - %s refuses a token with every scope, even an admin's", (_name, action) => {
    expect(tokenRefusal(tokenCaller([...TOKEN_SCOPES], "admin"), policyOf(action)!, action.scope)).toMatchObject({ code: 403, type: "FORBIDDEN" });
  });

  it.each(actions.filter(([, a]) => policyOf(a) === "required"))(
    "auth - %s: a token without its scope gets 403 naming it, one with it passes (scope any: every token)",
    (_name, action) => {
      const scope = action.scope!;
      if (scope === "any") return expect(tokenRefusal(tokenCaller(["usage:read"]), "required", scope)).toBeUndefined();
      const others = TOKEN_SCOPES.filter((s) => !scopeGranted([s], scope));
      const refused = tokenRefusal(tokenCaller(others), "required", scope);
      expect(refused).toMatchObject({ code: 403, type: "FORBIDDEN", ...(scope === "none" ? {} : { data: { missingScope: scope } }) });
      if (scope !== "none") expect(tokenRefusal(tokenCaller([scope]), "required", scope)).toBeUndefined();
    },
  );

  it.each([
    [["jobs:write"], "jobs:read", true],
    [["databases:write"], "databases:read", true],
    [["jobs:read"], "jobs:write", false],
    [["databases:read"], "databases:write", false],
    [["inference"], "usage:read", false],
    [[...TOKEN_SCOPES], "none", false],
    [["usage:read"], "any", true],
  ] as const)("auth - scopes %j grant %s: %s", (scopes, needed, granted) => {
    expect(scopeGranted(scopes, needed)).toBe(granted);
  });

  it("auth - a JWT or an API key is never asked for a scope", () => {
    for (const via of ["jwt", "apiKey"] as const) expect(tokenRefusal({ clientId: ID, role: "client", via }, "required", "jobs:write")).toBeUndefined();
  });
});
