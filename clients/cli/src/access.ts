/**
 * What the CLI asks a token or a job's `platformAccess` for, from comma lists, checked before
 * anything is sent (a mistake is a UsageError, exit 2): scopes from the SDK's list, database ids
 * as UUIDs, the token's name, lifetime and credit limit within the API's bounds (docs/accounts.md).
 */
import { TOKEN_SCOPES } from "../../sdk/src";
import type { PlatformAccess, TokenRequest, TokenScope } from "../../sdk/src";
import { UsageError } from "./context";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MIN_EXPIRY_S = 60;
const MAX_EXPIRY_S = 31536000;

/** `a,b` into its entries, trimmed; an empty entry (`a,,b`, a trailing comma) is a mistake. */
export function commaList(text: string, option: string): string[] {
  const entries = text.split(",").map((e) => e.trim());
  if (entries.some((e) => !e)) throw new UsageError(`${option}: an empty entry in ${JSON.stringify(text)}`);
  return [...new Set(entries)];
}

function scope(entry: string, option: string): TokenScope {
  if ((TOKEN_SCOPES as readonly string[]).includes(entry)) return entry as TokenScope;
  throw new UsageError(`${option}: unknown scope ${JSON.stringify(entry)} (one of ${TOKEN_SCOPES.join(", ")})`);
}

function databaseId(entry: string, option: string): string {
  if (UUID.test(entry)) return entry.toLowerCase();
  throw new UsageError(`${option}: ${JSON.stringify(entry)} is not a database id (a UUID, as \`ci-platform db ls\` shows)`);
}

export type TokenArgs = { name: string; scopes: string; models?: string; databases?: string; expiresIn?: number; maxCredits?: number };

/** The body of POST /api/auth/tokens from `tokens create`'s options. */
export function tokenRequest(args: TokenArgs): TokenRequest {
  const name = args.name.trim();
  if (!name || name.length > 64) throw new UsageError("--name: 1 to 64 characters");
  const body: TokenRequest = { name, scopes: commaList(args.scopes, "--scopes").map((s) => scope(s, "--scopes")) };
  if (args.models !== undefined) body.models = commaList(args.models, "--models");
  if (args.databases !== undefined) body.databases = commaList(args.databases, "--databases").map((d) => databaseId(d, "--databases"));
  if (args.expiresIn !== undefined) {
    if (!Number.isInteger(args.expiresIn) || args.expiresIn < MIN_EXPIRY_S || args.expiresIn > MAX_EXPIRY_S)
      throw new UsageError(`--expires-in: whole seconds from ${MIN_EXPIRY_S} to ${MAX_EXPIRY_S}`);
    body.expiresInSeconds = args.expiresIn;
  }
  if (args.maxCredits !== undefined) {
    if (!Number.isFinite(args.maxCredits) || args.maxCredits < 0) throw new UsageError("--max-credits: a number, 0 or more");
    body.maxCredits = args.maxCredits;
  }
  return body;
}

/**
 * `--platform-access inference,db:<id>,model:<name>,jobs:read`: scopes as written; `db:<id>`
 * entries are the databases, whose job roles imply `databases:write` (the scope a token needs to
 * grant a database role, docs/jobs.md); `model:<name>` entries are the models, implying `inference`.
 */
export function platformAccess(text: string): PlatformAccess {
  const option = "--platform-access";
  const scopes = new Set<TokenScope>();
  const models: string[] = [];
  const databases: string[] = [];
  for (const entry of commaList(text, option)) {
    if (entry.startsWith("db:")) databases.push(databaseId(entry.slice(3), option));
    else if (entry.startsWith("model:")) {
      if (!entry.slice(6)) throw new UsageError(`${option}: model: needs a model id (model:llama3.2:1b)`);
      models.push(entry.slice(6));
    } else scopes.add(scope(entry, option));
  }
  if (databases.length) scopes.add("databases:write");
  if (models.length) scopes.add("inference");
  const access: PlatformAccess = { scopes: [...scopes] };
  if (models.length) access.models = models;
  if (databases.length) access.databases = [...new Set(databases)];
  return access;
}
