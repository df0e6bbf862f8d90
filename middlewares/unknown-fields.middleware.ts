/**
 * API-DECISIONS Part 3: a REST-facing action (one with `rest`) refuses a field it does not know,
 * from the body or the query string alike, as 400 VALIDATION_FAILED naming it; its path params are
 * always known (lib/known-fields.ts). It runs once the caller is checked (an anonymous request
 * stays 401) and after the params validator, which leaves these actions' unknown fields to it.
 * Actions reached only over the bus tolerate extra fields, so that a newer caller and an older
 * service still talk during a rolling upgrade.
 */
import type { ActionSchema, Context, Middleware } from "moleculer";
import { unknownFieldsFinder } from "../lib/known-fields";
import { paramsError } from "../lib/params-validator";

export const UnknownFieldsMiddleware: Middleware = {
  localAction(handler: (ctx: Context) => Promise<unknown>, action: ActionSchema) {
    const find = unknownFieldsFinder(action);
    if (!find) return handler;
    return function refuseUnknown(ctx: Context) {
      const unknown = find(ctx.params);
      return unknown.length ? Promise.reject(paramsError(ctx, unknown)) : handler(ctx);
    } as typeof handler;
  },
};
