/**
 * What a restricted token (`cit_…`, services/auth/tokens.ts) may do: its scopes, declared beside
 * each REST action as `scope` (types/moleculer.d.ts) and enforced for token callers by the Auth
 * middleware. A `:write` scope includes its `:read`.
 */
export const TOKEN_SCOPES = ["jobs:read", "jobs:write", "inference", "databases:read", "databases:write", "usage:read"] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

/**
 * An action's `scope`: one of the token scopes; "any": every live token, whatever its scopes (who
 * the caller is); "none": no token (minting credentials, managing tokens).
 */
export type ActionScope = TokenScope | "any" | "none";

/** Whether a token with `scopes` may call an action needing `needed`. */
export function scopeGranted(scopes: readonly string[], needed: ActionScope): boolean {
  if (needed === "none") return false;
  if (needed === "any") return true;
  if (scopes.includes(needed)) return true;
  return needed.endsWith(":read") && scopes.includes(`${needed.slice(0, -":read".length)}:write`);
}
