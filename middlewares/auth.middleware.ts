/**
 * Enforces the `auth` policy declared on each action, so no handler has to remember to check.
 * An action reachable over REST without an explicit `auth` is treated as "required".
 */
import type { ActionSchema, Context, Middleware } from "moleculer";
import { forbidden, unauthorized } from "../lib/errors";
import type { AuthPolicy, CallerMeta } from "../lib/identity";

export function policyOf(action: ActionSchema): AuthPolicy | undefined {
  const declared = (action as { auth?: AuthPolicy }).auth;
  if (declared) return declared;
  return action.rest ? "required" : undefined;
}

export const AuthMiddleware: Middleware = {
  localAction(handler: (ctx: Context) => Promise<unknown>, action: ActionSchema) {
    const policy = policyOf(action);
    if (!policy || policy === "public") return handler;
    return function authGuard(ctx: Context<unknown, CallerMeta & { authError?: string }>) {
      const caller = ctx.meta.caller;
      if (!caller) return Promise.reject(unauthorized(ctx.meta.authError));
      if (policy === "jwt" && caller.via !== "jwt")
        return Promise.reject(forbidden("This endpoint requires a JWT access token, not an API key"));
      return handler(ctx);
    } as typeof handler;
  },
};
