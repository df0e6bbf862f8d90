/**
 * The submission rules of `platformAccess` (issue 28) that need no I/O: a caller signed in with a
 * restricted token cannot hand its job more than the token may do itself (its scopes, models and
 * databases). The check that every database is the account's (404 otherwise) asks dbaas, in
 * job-submit.ts.
 */
import type { FieldError } from "../../../lib/errors";
import type { Caller, TokenLimits as IdentityLimits } from "../../../lib/identity";
import type { PlatformAccessParams } from "../../../lib/job-spec";
import { scopeGranted } from "../../../lib/scopes";

/** What a restricted token may do (lib/identity.ts, on the caller); absent for a JWT or an API key. */
export type TokenLimits = Pick<IdentityLimits, "scopes"> & Partial<Pick<IdentityLimits, "models" | "databases">>;

/** The first way `access` goes beyond the caller's token, as a 400's field error; null when within it (or no token). */
export function accessBeyondCaller(access: PlatformAccessParams, limits: TokenLimits | undefined): FieldError | null {
  if (!limits) return null;
  const beyond = (what: string) => ({
    field: "platformAccess",
    message: `The 'platformAccess' field asks for ${what}, beyond what the caller's token may do.`,
  });
  const scope = access.scopes.find((s) => !scopeGranted(limits.scopes, s));
  if (scope) return beyond(`the scope ${scope}`);
  if (limits.models) {
    if (!access.models) return beyond("every model");
    const model = access.models.find((m) => !limits.models!.includes(m));
    if (model) return beyond(`the model ${JSON.stringify(model)}`);
  }
  // A job role does what the database's owner can: only a token that may write databases hands one out.
  if (access.databases?.length && !scopeGranted(limits.scopes, "databases:write")) return beyond("database roles (scope databases:write)");
  return null;
}

/** A database outside the token's `databases` is 404 to it, as everywhere else (never a hint that it exists). */
export function databaseOutsideCaller(access: PlatformAccessParams, limits: TokenLimits | undefined): boolean {
  const allowed = limits?.databases;
  return Boolean(allowed && (access.databases ?? []).some((d) => !allowed.includes(d)));
}

/** The token limits on the caller, if it signed in with a restricted token. */
export const callerTokenLimits = (caller: Caller | undefined): TokenLimits | undefined => (caller?.via === "token" ? caller.token : undefined);
