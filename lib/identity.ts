/**
 * The caller of a request, resolved once by the gateway and read by every service from ctx.meta.
 * It travels signed (`callerToken`, lib/caller-token.ts); the Auth middleware sets `caller` from
 * the verified token only.
 */
import type { ResponseMeta } from "./http-meta";
import type { TokenScope } from "./scopes";

/** A restricted token's limits (services/auth/tokens.ts): what the services check besides its scopes. */
export type TokenLimits = {
  id: string;
  scopes: TokenScope[];
  /** Only these models (null: any). */
  models: string[] | null;
  /** Only these databases (null: any); another is 404. */
  databases: string[] | null;
  /** The job it was issued to (null: one the account made). */
  jobId: string | null;
};

export type Caller = {
  clientId: string;
  role: string;
  /** How the caller proved who it is. */
  via: "jwt" | "apiKey" | "token";
  /** Set when `via` is "token": the token's limits. */
  token?: TokenLimits;
};

export type CallerMeta = {
  caller?: Caller;
  /** The gateway's signed, short-lived form of `caller`: the only source the services trust. */
  callerToken?: string;
  clientIp?: string;
  /** The `Idempotency-Key` request header as sent (checked by the actions that honour it). */
  idempotencyKey?: string;
} & ResponseMeta;

/**
 * An action's policy, declared on the action as `auth`:
 * - "public": anyone (default for actions with a REST route is "required", see the middleware);
 * - "required": a JWT, an API key, or a restricted token holding the action's `scope`;
 * - "jwt": a JWT only (an API key or a token gets 403);
 * - "admin": a JWT or an API key of an account with role `admin` (anyone else, any token, gets 403).
 */
export type AuthPolicy = "public" | "required" | "jwt" | "admin";

/** The role of operators (accounts whose e-mail is in ADMIN_EMAILS); clients have `client`. */
export const ADMIN_ROLE = "admin";
export const CLIENT_ROLE = "client";
