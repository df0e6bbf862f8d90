/**
 * Whether a caller may hand a job platform access (POST /api/gpu/jobs `platformAccess`): a JWT or
 * an API key may grant any scopes, models and databases of its account; a restricted token only
 * what it holds itself (each scope granted by its own, its models and databases within its lists),
 * so a token can never widen itself by submitting a job. Pure: gpu-scheduler calls it before
 * asking auth for the job's token.
 */
import type { Caller } from "./identity";
import { type ActionScope, scopeGranted } from "./scopes";

export type PlatformAccess = { scopes: string[]; models?: string[]; databases?: string[] };

/** Why `caller` may not grant `access` (a field and a message), or null when it may. */
export function grantProblem(caller: Caller, access: PlatformAccess): { field: string; message: string } | null {
  const token = caller.token;
  if (!token) return null;
  const beyond = access.scopes.find((s) => !scopeGranted(token.scopes, s as ActionScope));
  if (beyond) return { field: "platformAccess.scopes", message: `The token submitting the job does not hold the scope ${beyond}` };
  // Database ids are held lowercase; model ids are compared as written.
  const outside = (held: string[] | null, asked: string[] | undefined, what: string, field: string, norm = (x: string) => x) => {
    if (!held) return null;
    if (!asked) return { field, message: `The token submitting the job is limited to some ${what}: list them (at most its own)` };
    const other = asked.find((x) => !held.includes(norm(x)));
    return other === undefined ? null : { field, message: `The token submitting the job may not use the ${what.slice(0, -1)} ${other}` };
  };
  return (
    outside(token.models, access.models, "models", "platformAccess.models") ??
    outside(token.databases, access.databases, "databases", "platformAccess.databases", (x) => x.toLowerCase())
  );
}
