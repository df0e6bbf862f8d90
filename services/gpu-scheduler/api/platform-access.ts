/**
 * The submission rules of `platformAccess` (issue 28) that need no I/O: a caller signed in with a
 * restricted token cannot hand its job more than the token may do itself (its scopes, models and
 * databases). The check that every database is the account's (404 otherwise) asks dbaas, in
 * job-submit.ts.
 */
import type { FieldError } from "../../../lib/errors";
import type { PlatformAccessParams } from "../../../lib/job-spec";

/** What a restricted token may do (as the gateway puts it on the caller); absent for a JWT or an API key. */
export type TokenLimits = { scopes: readonly string[]; models?: readonly string[] | null; databases?: readonly string[] | null };

/** `:write` includes `:read`. */
export function scopeCovered(scope: string, held: readonly string[]): boolean {
  return held.includes(scope) || (scope.endsWith(":read") && held.includes(scope.replace(/:read$/, ":write")));
}

/** The first way `access` goes beyond the caller's token, as a 400's field error; null when within it (or no token). */
export function accessBeyondCaller(access: PlatformAccessParams, limits: TokenLimits | undefined): FieldError | null {
  if (!limits) return null;
  const beyond = (what: string) => ({
    field: "platformAccess",
    message: `The 'platformAccess' field asks for ${what}, beyond what the caller's token may do.`,
  });
  const scope = access.scopes.find((s) => !scopeCovered(s, limits.scopes));
  if (scope) return beyond(`the scope ${scope}`);
  if (limits.models) {
    if (!access.models) return beyond("every model");
    const model = access.models.find((m) => !limits.models!.includes(m));
    if (model) return beyond(`the model ${JSON.stringify(model)}`);
  }
  // A job role does what the database's owner can: only a token that may write databases hands one out.
  if (access.databases?.length && !scopeCovered("databases:write", limits.scopes)) return beyond("database roles (scope databases:write)");
  return null;
}

/** A database outside the token's `databases` is 404 to it, as everywhere else (never a hint that it exists). */
export function databaseOutsideCaller(access: PlatformAccessParams, limits: TokenLimits | undefined): boolean {
  const allowed = limits?.databases;
  return Boolean(allowed && (access.databases ?? []).some((d) => !allowed.includes(d)));
}

/** The token limits on the caller, if it signed in with a restricted token (shape of wt/tokens' caller). */
export function callerTokenLimits(caller: unknown): TokenLimits | undefined {
  const token = (caller as { token?: unknown } | undefined)?.token;
  if (!token || typeof token !== "object" || !Array.isArray((token as TokenLimits).scopes)) return undefined;
  return token as TokenLimits;
}
