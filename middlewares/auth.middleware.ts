/**
 * Enforces, for every action, who may call it and for whom, so no handler has to remember to check:
 * - the sender's role (remote calls, role-form node ids) must be among the action's `callers`
 *   (lib/bus-identity.ts);
 * - `ctx.meta.caller` comes only from the signed caller token the gateway put in
 *   `ctx.meta.callerToken` (lib/caller-token.ts); whatever caller arrives beside it is replaced;
 * - the action's `auth` policy: an action reachable over REST without an explicit `auth` is
 *   treated as "required";
 * - a restricted token (`via: "token"`) also needs the action's `scope` (lib/scopes.ts): outside it
 *   403 with `details.missingScope`; an action with scope "none" or none declared, and every "jwt" and
 *   "admin" action, refuses tokens whatever the account's role.
 */
import type { ActionSchema, Context, Middleware, ServiceBroker } from "moleculer";
import { callersOf, senderMayCall } from "../lib/bus-identity";
import { CallerKeySettings, callerVerifier, checkCallerKeys } from "../lib/caller-keys";
import { apiError, forbidden, unauthorized } from "../lib/errors";
import { ADMIN_ROLE, AuthPolicy, Caller, CallerMeta } from "../lib/identity";
import { ActionScope, scopeGranted } from "../lib/scopes";

type AuthMeta = CallerMeta & { authError?: string };

export function policyOf(action: ActionSchema): AuthPolicy | undefined {
  return action.auth ?? (action.rest ? "required" : undefined);
}

/** Sets (or clears) ctx.meta.caller from the token alone; says why there is none. */
function resolveCaller(meta: AuthMeta, keys: CallerKeySettings): string | undefined {
  if (meta.callerToken === undefined) {
    delete meta.caller;
    return meta.authError;
  }
  const checked = callerVerifier(keys).check(meta.callerToken);
  if ("caller" in checked) {
    meta.caller = checked.caller;
    return undefined;
  }
  delete meta.caller;
  return checked.error;
}

function keysNeeded(broker: ServiceBroker): { sign: boolean; verify: boolean } {
  const sign = broker.services.some((s) => s.name === "api-gateway");
  const verify = broker.services.some((s) =>
    Object.values(s.schema.actions ?? {}).some((a) => {
      const policy = typeof a === "object" && a ? policyOf(a) : undefined;
      return policy !== undefined && policy !== "public";
    }),
  );
  return { sign, verify };
}

/** Why a restricted token may not call an action of `policy` and `scope`, or undefined when it may. */
export function tokenRefusal(caller: Caller, policy: AuthPolicy, scope: ActionScope | undefined): Error | undefined {
  if (caller.via !== "token") return undefined;
  if (policy === "public") return undefined;
  if (policy !== "required" || scope === undefined || scope === "none") return forbidden("Restricted tokens cannot call this endpoint");
  if (!scopeGranted(caller.token?.scopes ?? [], scope)) return apiError("FORBIDDEN", `This token lacks the scope ${scope}`, { missingScope: scope });
  return undefined;
}

let warnedDevelopmentKeys = false;

/** `keys`: the process's caller-key settings (lib/platform-settings.ts). */
export const AuthMiddleware = (keys: CallerKeySettings): Middleware => ({
  // Production without the keys a process needs refuses to start, before serving anything.
  starting(broker: ServiceBroker) {
    const warning = checkCallerKeys(keysNeeded(broker), keys);
    if (warning && !warnedDevelopmentKeys) {
      warnedDevelopmentKeys = true;
      broker.logger.warn(warning);
    }
  },

  localAction(handler: (ctx: Context) => Promise<unknown>, action: ActionSchema) {
    const policy = policyOf(action);
    const callers = callersOf(action);
    const name = action.name;
    return function authGuard(ctx: Context<unknown, AuthMeta>) {
      if (ctx.nodeID !== ctx.broker.nodeID && !senderMayCall(ctx.nodeID ?? "", callers))
        return Promise.reject(forbidden(`Node ${ctx.nodeID} may not call ${name}`));
      const reason = resolveCaller(ctx.meta, keys);
      if (!policy || policy === "public") return handler(ctx);
      const caller = ctx.meta.caller;
      if (!caller) return Promise.reject(unauthorized(reason));
      if (policy === "jwt" && caller.via !== "jwt") return Promise.reject(forbidden("This endpoint requires a JWT access token, not an API key or a token"));
      if (policy === "admin" && caller.role !== ADMIN_ROLE) return Promise.reject(forbidden("This endpoint is for administrators"));
      const refusal = tokenRefusal(caller, policy, action.scope);
      if (refusal) return Promise.reject(refusal);
      return handler(ctx);
    } as typeof handler;
  },

  // A remote answer's meta is merged into the caller's context: it must not bring another caller.
  remoteAction(handler: (ctx: Context) => Promise<unknown>) {
    return function keepCaller(ctx: Context<unknown, AuthMeta>) {
      const { caller, callerToken } = ctx.meta;
      const restore = () => {
        if (callerToken === undefined) delete ctx.meta.callerToken;
        else ctx.meta.callerToken = callerToken;
        if (caller === undefined) delete ctx.meta.caller;
        else ctx.meta.caller = caller;
      };
      return handler(ctx).then(
        (res) => {
          restore();
          return res;
        },
        (err) => {
          restore();
          throw err;
        },
      );
    } as typeof handler;
  },
});
