/**
 * Turns a request's credentials into the caller, or the reason there is none.
 * - JWT: verified here (lib/jwt.ts rules; a token verified once is remembered until its exp, as
 *   caller tokens are: the hot path does not parse and check the same signature again), then its
 *   account must exist: positive answers are
 *   cached per process (bounded, ACCOUNT_CACHE_MS), so the hot path reads no database. The role is
 *   the account's, not the token's: an account removed from ADMIN_EMAILS loses `admin` within
 *   ACCOUNT_CACHE_MS, even with a token signed before.
 * - API key: its shape is checked here (anything else, an overlong key included, is 401), and only
 *   its SHA-256 goes to auth over the bus. Auth's answer is cached per process, keyed by that
 *   SHA-256 (never the key), for at most `keyCacheMs` (GATEWAY_API_KEY_CACHE_MS, default and most
 *   1 s, counted from when the lookup was sent): a rotated key is refused within 1 s on every
 *   replica, so the hot path costs what a JWT's does. A refused key is not cached (a new key is
 *   never refused for an old answer). auth broadcasts `apiKey.replaced` when it replaces a key:
 *   a replica that hears it distrusts every answer for that account asked before it, so a rotation
 *   usually stops the old key at once; the 1 s bound does not depend on that event arriving.
 *   A hit returns a copy of the caller auth gave (same role), never a shared object.
 * - Restricted token (`cit_…`): as an API key (its SHA-256 to auth, the same ≤ 1 s cache), and an
 *   answer is never trusted past the token's expiry; auth broadcasts `token.revoked` when tokens are
 *   deleted. A token at its `maxCredits` resolves to a refusal (403 QUOTA_EXCEEDED, tokenCredits).
 * The lookups and the clock are injected, so the decisions are tested without a broker.
 */
import { apiError } from "../../lib/errors";
import type { Caller } from "../../lib/identity";
import { verifyAccessToken } from "../../lib/jwt";
import { LruCache } from "../../lib/lru-cache";
import { API_KEY_PATTERN, hashApiKey, RESTRICTED_TOKEN_PATTERN } from "../auth/api-keys";
import type { ResolvedToken } from "../auth/token-actions";
import type { Credentials } from "./credentials";

export const ACCOUNT_CACHE_MS = 30_000;
const ACCOUNT_CACHE_ENTRIES = 10_000;
/** The longest an API key's answer is trusted: the revocation rule (a rotated key stops within 1 s). */
export const API_KEY_CACHE_MS = 1_000;
export const API_KEY_CACHE_ENTRIES = 10_000;

const INVALID_KEY = "API key is invalid or was revoked";
const INVALID_TOKEN = "Token is invalid, expired or was deleted";

/** `refusal`: the credentials are good but may not be used now (a token at its credit limit). */
export type Resolution = { caller: Caller } | { error?: string } | { refusal: Error };

/** Auth's answer for a key or a token, when it was asked, and (tokens) until when it may hold and its credits. */
type Answer = { caller: Caller; askedAt: number; expiresAtMs?: number; credits?: { max: number | null; used: number } };

export type CallerLookups<T> = {
  /** The caller owning the key with this SHA-256, or null. */
  apiKey(via: T, keyHash: string): Promise<Caller | null>;
  /** The role of the account with this id, or null when there is none. */
  accountRole(via: T, id: string): Promise<string | null>;
  /** The live restricted token with this SHA-256, or null (absent: tokens are refused). */
  token?(via: T, tokenHash: string): Promise<ResolvedToken | null>;
};

export class CallerResolver<T> {
  private readonly accounts = new LruCache<string, { role: string; until: number }>(ACCOUNT_CACHE_ENTRIES); // id → role, valid until (ms)
  private readonly verified = new LruCache<string, { sub: string; expMs: number }>(ACCOUNT_CACHE_ENTRIES); // token → its account, until exp
  private readonly keys = new LruCache<string, Answer>(API_KEY_CACHE_ENTRIES); // key or token SHA-256 → auth's answer, when asked
  private readonly replaced = new LruCache<string, number>(API_KEY_CACHE_ENTRIES); // account id (its key) or token id → when replaced or deleted (heard)

  constructor(
    private readonly lookups: CallerLookups<T>,
    /** JWT_SECRET, verifying access tokens. */
    private readonly jwtSecret: string,
    private readonly now: () => number = Date.now,
    /** How long auth's answer for an API key is trusted (0: asked on every request); at most API_KEY_CACHE_MS. */
    private readonly keyCacheMs: number = API_KEY_CACHE_MS,
  ) {}

  async resolve(credentials: Credentials, via: T): Promise<Resolution> {
    switch (credentials.kind) {
      case "none":
        return {};
      case "malformed":
        return { error: "Malformed credentials" };
      case "jwt":
        return this.fromJwt(credentials.token, via);
      case "apiKey":
        return this.fromApiKey(credentials.key, via);
      case "restrictedToken":
        return this.fromToken(credentials.token, via);
    }
  }

  /** auth deleted this restricted token (its `token.revoked` event): answers asked before now are not trusted. */
  tokenRevoked(tokenId: string): void {
    this.replaced.set(tokenId, this.now());
  }

  /** auth replaced this account's key (its `apiKey.replaced` event): answers asked before now are not trusted. */
  keyReplaced(clientId: string): void {
    this.replaced.set(clientId, this.now());
  }

  private async fromApiKey(key: string, via: T): Promise<Resolution> {
    if (!API_KEY_PATTERN.test(key)) return { error: INVALID_KEY };
    const answer = await this.answerFor(hashApiKey(key), async (keyHash, askedAt) => {
      const caller = await this.lookups.apiKey(via, keyHash);
      return caller && { caller: { ...caller }, askedAt };
    });
    return answer ? { caller: { ...answer.caller } } : { error: INVALID_KEY };
  }

  private async fromToken(token: string, via: T): Promise<Resolution> {
    const lookup = this.lookups.token;
    if (!lookup || !RESTRICTED_TOKEN_PATTERN.test(token)) return { error: INVALID_TOKEN };
    const answer = await this.answerFor(hashApiKey(token), async (tokenHash, askedAt) => {
      const found = await lookup(via, tokenHash);
      if (!found) return null;
      return { caller: found.caller, askedAt, expiresAtMs: Date.parse(found.expiresAt), credits: { max: found.maxCredits, used: found.creditsUsed } };
    });
    if (!answer) return { error: INVALID_TOKEN };
    const { max, used } = answer.credits!;
    if (max !== null && used >= max)
      return {
        refusal: apiError("QUOTA_EXCEEDED", `This token's credit limit (${max}) is used up`, { resource: "tokenCredits", limit: max, used }),
      };
    return { caller: { ...answer.caller } };
  }

  /** Auth's answer for a key or token hash: cached while fresh (≤ keyCacheMs, not past expiry, not replaced since), else asked. */
  private async answerFor(hash: string, ask: (hash: string, askedAt: number) => Promise<Answer | null>): Promise<Answer | null> {
    const now = this.now();
    const cached = this.keys.get(hash);
    if (cached && this.fresh(cached, now)) return cached;
    if (cached) this.keys.delete(hash);
    const answer = await ask(hash, now);
    if (!answer || (answer.expiresAtMs !== undefined && answer.expiresAtMs <= this.now())) return null;
    if (this.keyCacheMs > 0) this.keys.set(hash, answer);
    return answer;
  }

  private fresh(answer: Answer, now: number): boolean {
    // A negative age (the wall clock stepped back) is not trusted either: the bound must hold.
    const age = now - answer.askedAt;
    if (age < 0 || age >= this.keyCacheMs) return false;
    if (answer.expiresAtMs !== undefined && answer.expiresAtMs <= now) return false;
    const { clientId, token } = answer.caller;
    return token ? !this.replacedSince(token.id, answer.askedAt) : !this.replacedSince(clientId, answer.askedAt);
  }

  /** Whether the account's key (or the token) was replaced at or after `askedAt` (the same millisecond counts: it may have been after). */
  private replacedSince(id: string, askedAt: number): boolean {
    const at = this.replaced.get(id);
    return at !== undefined && at >= askedAt;
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
export const gatewayCallerResolver = (jwtSecret: string, keyCacheMs: number): CallerResolver<CallingContext> =>
  new CallerResolver<CallingContext>(
    {
      apiKey: (ctx, keyHash) => ctx.call<Caller | null, { keyHash: string }>("auth.resolveApiKey", { keyHash }),
      accountRole: async (ctx, id) => (await ctx.call<{ role: string } | null, { id: string }>("auth.resolveAccount", { id }))?.role ?? null,
      token: (ctx, tokenHash) => ctx.call<ResolvedToken | null, { tokenHash: string }>("auth.resolveToken", { tokenHash }),
    },
    jwtSecret,
    Date.now,
    keyCacheMs,
  );
