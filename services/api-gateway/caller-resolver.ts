/**
 * Turns a request's credentials into the caller, or the reason there is none.
 * - JWT: verified here (lib/jwt.ts rules; a token verified once is remembered until its exp, as
 *   caller tokens are: the hot path does not parse and check the same signature again), then its
 *   account must exist: positive answers are
 *   cached per process (bounded, ACCOUNT_CACHE_MS), so the hot path reads no database. The role is
 *   the account's, not the token's: an account removed from ADMIN_EMAILS loses `admin` within
 *   ACCOUNT_CACHE_MS, even with a token signed before.
 * - API key: its shape is checked here (anything else, an overlong key included, is 401), and only
 *   its SHA-256 goes to auth over the bus. Keys are not cached: a rotated key stops at once.
 * The lookups are injected, so the decisions are tested without a broker.
 */
import type { Caller } from "../../lib/identity";
import { verifyAccessToken } from "../../lib/jwt";
import { LruCache } from "../../lib/lru-cache";
import { API_KEY_PATTERN, hashApiKey } from "../auth/api-keys";
import type { Credentials } from "./credentials";

export const ACCOUNT_CACHE_MS = 30_000;
const ACCOUNT_CACHE_ENTRIES = 10_000;

export type Resolution = { caller: Caller } | { error?: string };

export type CallerLookups<T> = {
  /** The caller owning the key with this SHA-256, or null. */
  apiKey(via: T, keyHash: string): Promise<Caller | null>;
  /** The role of the account with this id, or null when there is none. */
  accountRole(via: T, id: string): Promise<string | null>;
};

export class CallerResolver<T> {
  private readonly accounts = new LruCache<string, { role: string; until: number }>(ACCOUNT_CACHE_ENTRIES); // id → role, valid until (ms)
  private readonly verified = new LruCache<string, { sub: string; expMs: number }>(ACCOUNT_CACHE_ENTRIES); // token → its account, until exp

  constructor(
    private readonly lookups: CallerLookups<T>,
    /** JWT_SECRET, verifying access tokens. */
    private readonly jwtSecret: string,
    private readonly now: () => number = Date.now,
  ) {}

  async resolve(credentials: Credentials, via: T): Promise<Resolution> {
    switch (credentials.kind) {
      case "none":
        return {};
      case "malformed":
        return { error: "Malformed credentials" };
      case "jwt":
        return this.fromJwt(credentials.token, via);
      case "apiKey": {
        if (!API_KEY_PATTERN.test(credentials.key)) return { error: "API key is invalid or was revoked" };
        const caller = await this.lookups.apiKey(via, hashApiKey(credentials.key));
        return caller ? { caller } : { error: "API key is invalid or was revoked" };
      }
    }
  }

  /** The token's account: from the cache of tokens verified before (until their exp), else verified now. */
  private verify(token: string, now: number): { sub: string } | { error: string } {
    const known = this.verified.get(token);
    if (known && known.expMs > now) return known;
    if (known) {
      this.verified.delete(token);
      return { error: "Access token expired" };
    }
    const claims = verifyAccessToken(token, this.jwtSecret, now);
    if ("error" in claims) return claims;
    this.verified.set(token, { sub: claims.sub, expMs: claims.exp * 1000 });
    return claims;
  }

  private async fromJwt(token: string, via: T): Promise<Resolution> {
    const now = this.now();
    const claims = this.verify(token, now);
    if ("error" in claims) return { error: claims.error };
    const cached = this.accounts.get(claims.sub);
    if (cached !== undefined && cached.until > now) return { caller: { clientId: claims.sub, role: cached.role, via: "jwt" } };
    const role = await this.lookups.accountRole(via, claims.sub);
    if (role === null) return { error: "The account of these credentials no longer exists" };
    this.accounts.set(claims.sub, { role, until: now + ACCOUNT_CACHE_MS });
    return { caller: { clientId: claims.sub, role, via: "jwt" } };
  }
}

type CallingContext = { call<R, P>(action: string, params: P): Promise<R> };

/** The gateway's resolver: lookups are calls to auth made on the request's context. */
export const gatewayCallerResolver = (jwtSecret: string): CallerResolver<CallingContext> =>
  new CallerResolver<CallingContext>(
    {
      apiKey: (ctx, keyHash) => ctx.call<Caller | null, { keyHash: string }>("auth.resolveApiKey", { keyHash }),
      accountRole: async (ctx, id) => (await ctx.call<{ role: string } | null, { id: string }>("auth.resolveAccount", { id }))?.role ?? null,
    },
    jwtSecret,
  );
