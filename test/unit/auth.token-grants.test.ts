/** A restricted token can grant a job only what it holds itself (lib/token-grants.ts): a table, no broker. */
import type { Caller } from "../../lib/identity";
import { grantProblem, PlatformAccess } from "../../lib/token-grants";

const ID = "4b6f1c2e-0000-4000-8000-000000000001";
const DB = "4b6f1c2e-0000-4000-8000-0000000000db";
const token = (scopes: string[], models: string[] | null = null, databases: string[] | null = null): Caller =>
  ({ clientId: ID, role: "client", via: "token", token: { id: ID, scopes, models, databases, jobId: null } }) as Caller;

describe("auth - what a token may grant a job", () => {
  it.each<[string, Caller, PlatformAccess, string | null]>([
    ["a JWT grants anything", { clientId: ID, role: "client", via: "jwt" }, { scopes: ["inference", "jobs:write"] }, null],
    ["a token grants its own scopes", token(["inference", "jobs:write"]), { scopes: ["inference", "jobs:read"] }, null],
    ["not a scope it lacks", token(["jobs:write"]), { scopes: ["inference"] }, "platformAccess.scopes"],
    ["not :write with :read", token(["databases:read"]), { scopes: ["databases:write"] }, "platformAccess.scopes"],
    ["its models, when it has a list", token(["inference"], ["a", "b"]), { scopes: ["inference"], models: ["a"] }, null],
    ["not a model outside its list", token(["inference"], ["a"]), { scopes: ["inference"], models: ["a", "c"] }, "platformAccess.models"],
    ["not every model, when it has a list", token(["inference"], ["a"]), { scopes: ["inference"] }, "platformAccess.models"],
    ["its databases (any case)", token(["databases:read"], null, [DB]), { scopes: ["databases:read"], databases: [DB.toUpperCase()] }, null],
    ["not another database", token(["databases:read"], null, [DB]), { scopes: ["databases:read"], databases: [ID] }, "platformAccess.databases"],
  ])("auth - %s", (_name, caller, access, field) => {
    expect(grantProblem(caller, access)?.field ?? null).toBe(field);
  });
});
