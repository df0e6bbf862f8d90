/** Reads the credentials a request carries: `Authorization: Bearer <jwt|ci_…>` or `X-API-Key: ci_…`. */
import type { IncomingHttpHeaders } from "http";

export type Credentials = { kind: "jwt"; token: string } | { kind: "apiKey"; key: string } | { kind: "none" } | { kind: "malformed" };

export const API_KEY_PREFIX = "ci_";

export function readCredentials(headers: IncomingHttpHeaders): Credentials {
  const apiKeyHeader = headers["x-api-key"];
  if (typeof apiKeyHeader === "string" && apiKeyHeader.length > 0) {
    return apiKeyHeader.startsWith(API_KEY_PREFIX) ? { kind: "apiKey", key: apiKeyHeader.trim() } : { kind: "malformed" };
  }
  const authorization = headers.authorization;
  if (!authorization) return { kind: "none" };
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) return { kind: "malformed" };
  const token = match[1];
  return token.startsWith(API_KEY_PREFIX) ? { kind: "apiKey", key: token } : { kind: "jwt", token };
}
