/** Reads the credentials a request carries: `Authorization: Bearer <jwt|ci_…|cit_…>` or `X-API-Key: ci_…|cit_…`. */
import type { IncomingHttpHeaders } from "http";

export type Credentials =
  { kind: "jwt"; token: string } | { kind: "apiKey"; key: string } | { kind: "restrictedToken"; token: string } | { kind: "none" } | { kind: "malformed" };

export const API_KEY_PREFIX = "ci_";
/** A restricted token's prefix (services/auth/token-actions.ts). */
export const RESTRICTED_TOKEN_PREFIX = "cit_";

function platformCredential(value: string): Credentials | undefined {
  if (value.startsWith(API_KEY_PREFIX)) return { kind: "apiKey", key: value };
  if (value.startsWith(RESTRICTED_TOKEN_PREFIX)) return { kind: "restrictedToken", token: value };
  return undefined;
}

export function readCredentials(headers: IncomingHttpHeaders): Credentials {
  const apiKeyHeader = headers["x-api-key"];
  if (typeof apiKeyHeader === "string" && apiKeyHeader.length > 0) {
    return platformCredential(apiKeyHeader.trimEnd()) ?? { kind: "malformed" };
  }
  const authorization = headers.authorization;
  if (!authorization) return { kind: "none" };
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) return { kind: "malformed" };
  const token = match[1];
  return platformCredential(token) ?? { kind: "jwt", token };
}
