/**
 * Refuses, for every action however it is called (HTTP through the gateway, or straight over the
 * bus), params holding strings that cannot be stored or are not text: NUL bytes and unpaired
 * surrogates are 400 VALIDATION_FAILED naming the field, before any handler or batch sees them.
 */
import type { ActionSchema, Context, Middleware } from "moleculer";
import { validationFailed } from "../lib/errors";
import { findUnstorable, knownClean } from "../lib/input-guard";

export const InputMiddleware: Middleware = {
  localAction(handler: (ctx: Context) => Promise<unknown>, _action: ActionSchema) {
    return function inputGuard(ctx: Context) {
      if (knownClean(ctx.params)) return handler(ctx);
      const problems = findUnstorable(ctx.params);
      if (problems.length) return Promise.reject(validationFailed(problems, "Request contains text that cannot be accepted"));
      return handler(ctx);
    } as typeof handler;
  },
};
