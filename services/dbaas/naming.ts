/**
 * Every identifier dbaas sends to the tenant server is generated here, checked against its
 * pattern and quoted: nothing a client sends ever reaches SQL.
 */
import { randomBytes } from "crypto";

export type RandomHex = (bytes: number) => string;

export const defaultRandomHex: RandomHex = (bytes) => randomBytes(bytes).toString("hex");

export const PATTERNS = {
  database: /^client_[a-z0-9]{8}_[0-9a-f]{8}$/,
  user: /^user_[0-9a-f]{12}$/,
  /** Owns the tenant's objects while its database is read-only (over quota). */
  hold: /^hold_[0-9a-f]{12}$/,
  /** A login role made for one GPU job attempt (job-roles.ts): a member of its database's tenant role. */
  job: /^job_[0-9a-f]{16}$/,
} as const;

export type IdentifierKind = keyof typeof PATTERNS;

export type TenantNames = { databaseName: string; username: string; holdRole: string };

/** The 8 characters of the client id in the database name (spec 2.8): lowercase, [a-z0-9] only. */
export function clientPrefix(clientId: string): string {
  return clientId
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "")
    .slice(0, 8)
    .padEnd(8, "0");
}

export function generateNames(clientId: string, randomHex: RandomHex = defaultRandomHex): TenantNames {
  const userHex = randomHex(6);
  const names = {
    databaseName: `client_${clientPrefix(clientId)}_${randomHex(4)}`,
    username: `user_${userHex}`,
    holdRole: holdRoleOf(`user_${userHex}`),
  };
  checkIdentifier("database", names.databaseName);
  checkIdentifier("user", names.username);
  checkIdentifier("hold", names.holdRole);
  return names;
}

/** The read-only owner role belonging to a tenant role: same hex, other prefix. */
export function holdRoleOf(username: string): string {
  checkIdentifier("user", username);
  return `hold_${username.slice("user_".length)}`;
}

/** A new job role's name (job-roles.ts). */
export function generateJobRoleName(randomHex: RandomHex = defaultRandomHex): string {
  return checkIdentifier("job", `job_${randomHex(8)}`);
}

export function checkIdentifier(kind: IdentifierKind, name: string): string {
  if (!PATTERNS[kind].test(name)) throw new Error(`Refusing a ${kind} identifier that breaks its pattern: ${JSON.stringify(name)}`);
  return name;
}

/** A quoted identifier for SQL text, only ever for names that passed their pattern. */
export function ident(kind: IdentifierKind, name: string): string {
  return `"${checkIdentifier(kind, name)}"`;
}

export function kindOf(name: string): IdentifierKind | undefined {
  return (Object.keys(PATTERNS) as IdentifierKind[]).find((kind) => PATTERNS[kind].test(name));
}
