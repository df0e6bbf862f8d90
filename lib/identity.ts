/**
 * The caller of a request, resolved once by the gateway and read by every service from ctx.meta.
 * It travels signed (`callerToken`, lib/caller-token.ts); the Auth middleware sets `caller` from
 * the verified token only.
 */
import type { ResponseMeta } from "./http-meta";

export type Caller = {
  clientId: string;
  role: string;
  /** How the caller proved who it is. */
  via: "jwt" | "apiKey";
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
 * - "required": a JWT or an API key;
 * - "jwt": a JWT only (an API key gets 403);
 * - "admin": a JWT or an API key of an account with role `admin` (anyone else gets 403).
 */
export type AuthPolicy = "public" | "required" | "jwt" | "admin";

/** The role of operators (accounts whose e-mail is in ADMIN_EMAILS); clients have `client`. */
export const ADMIN_ROLE = "admin";
export const CLIENT_ROLE = "client";
