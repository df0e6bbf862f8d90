/**
 * The submission rules of `platformAccess` (issue 28) that need no I/O, for a caller signed in with
 * a restricted token: it cannot hand its job more than it holds (lib/token-grants.ts: its scopes,
 * models and databases: 400), a database outside its list is 404 to it as on every route, and a
 * job's database role (the owner's rights) needs its `databases:write`. The check that every
 * database is the account's (404 otherwise) asks dbaas, in job-submit.ts.
 */
import { type FieldError, notFound, validationFailed } from "../../../lib/errors";
import type { Caller } from "../../../lib/identity";
import type { PlatformAccessParams } from "../../../lib/job-spec";
import { scopeGranted } from "../../../lib/scopes";
import { grantProblem } from "../../../lib/token-grants";

/** What is wrong with `access` for this caller: 404 (a database outside its token), a 400's field error, or null. */
export function accessProblem(caller: Caller, access: PlatformAccessParams): "notFound" | FieldError | null {
  const token = caller.token;
  if (!token) return null;
  const databases = access.databases ?? [];
  if (token.databases && databases.some((d) => !token.databases!.includes(d.toLowerCase()))) return "notFound";
  const problem = grantProblem(caller, access);
  if (problem) return problem;
  if (databases.length && !scopeGranted(token.scopes, "databases:write"))
    return { field: "platformAccess.databases", message: "The token submitting the job does not hold databases:write, which database roles need" };
  return null;
}

/** accessProblem as the error to throw, if any. */
export function checkAccess(caller: Caller, access: PlatformAccessParams): void {
  const problem = accessProblem(caller, access);
  if (problem === "notFound") throw notFound("Database");
  if (problem) throw validationFailed([problem]);
}
