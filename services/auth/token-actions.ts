/**
 * Restricted tokens (`cit_…`), the auth service's actions for them: made by hand under
 * /api/auth/tokens (JWT only to mint; never by a token), issued to jobs by gpu-scheduler, and
 * resolved for the gateway by their SHA-256. A deleted token is announced to every gateway replica
 * (`token.revoked`), which also trust an answer for at most 1 s (caller-resolver.ts).
 */
import { randomUUID } from "crypto";
import type { Context, Service, ServiceActionsSchema } from "moleculer";
import { apiError, notFound } from "../../lib/errors";
import { respondCreated } from "../../lib/http-meta";
import type { Caller, CallerMeta, TokenLimits } from "../../lib/identity";
import type { TokenScope } from "../../lib/scopes";
import { TOKEN_REVOKED } from "../../lib/event-names";
import { isUuid } from "../../lib/uuid";
import { Message } from "../dbaas/contract";
import { generateRestrictedToken, hashApiKey, KEY_HASH_PATTERN } from "./api-keys";
import { CreatedToken, TokenInfo, TokenList } from "./contract";
import {
  CREATE_TOKEN_PARAMS,
  CreateTokenParams,
  DEFAULT_TOKEN_TTL_S,
  ISSUE_JOB_TOKEN_PARAMS,
  IssueJobTokenParams,
  JOB_TOKENS_PARAMS,
  MAX_LIVE_TOKENS,
  TOKEN_CREDITS_PARAMS,
  TOKEN_ID_PARAMS,
  TOKEN_IDS_PARAMS,
  TokenCreditsParams,
} from "./token-params";
import type { NewToken, TokenRow, TokensRepository } from "./tokens.repository";
import { KeyedBatch } from "../../lib/keyed-batch";

export type TokensThis = Service & { tokens: TokensRepository; tokenUse: KeyedBatch<Date> };

/** Tokens' last-use times (noted by resolveToken): the later of two wins; written every 2 s. */
export const lastUseBatch = (tokens: TokensRepository, warn: (message: string) => void): KeyedBatch<Date> =>
  new KeyedBatch<Date>(
    (lastUsed) => tokens.touch(lastUsed),
    (a, b) => (a > b ? a : b),
    (m) => warn(`Token last-use times: ${m}`),
    2_000,
  );

/** A token's credit limit (null: none) and the credits it used. */
export type TokenCredits = { id: string; maxCredits: number | null; creditsUsed: number };

/** A resolved token: its caller, when it expires, and its credit limit and use (the gateway refuses it at the limit). */
export type ResolvedToken = { caller: Caller; expiresAt: string; maxCredits: number | null; creditsUsed: number };

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The fields every view of a token shows. */
const commonView = (row: TokenRow) => ({
  id: row.id,
  name: row.name,
  scopes: row.scopes as TokenScope[],
  models: row.models,
  databases: row.databases,
  expiresAt: iso(row.expires_at)!,
  maxCredits: row.max_credits,
  createdAt: iso(row.created_at)!,
});

const createdView = (row: TokenRow, token: string): CreatedToken => ({ ...commonView(row), token });

const infoView = (row: TokenRow): TokenInfo => ({ ...commonView(row), creditsUsed: row.credits_used, lastUsedAt: iso(row.last_used_at), jobId: row.job_id });

export const limitsOf = (row: TokenRow): TokenLimits => ({
  id: row.id,
  scopes: row.scopes as TokenScope[],
  models: row.models,
  databases: row.databases?.map((d) => d.toLowerCase()) ?? null,
  jobId: row.job_id,
});

/** Stores a new token; its secret is returned once and never kept. */
async function mint(this: TokensThis, fields: Omit<NewToken, "id" | "tokenHash">, liveLimit: number | null): Promise<CreatedToken> {
  const token = generateRestrictedToken();
  const outcome = await this.tokens.insert({ ...fields, id: randomUUID(), tokenHash: hashApiKey(token) }, liveLimit);
  if ("row" in outcome) return createdView(outcome.row, token);
  if (outcome.refused === "noAccount") throw notFound("Account");
  throw apiError("QUOTA_EXCEEDED", `An account may have at most ${MAX_LIVE_TOKENS} live tokens`, {
    resource: "tokens",
    limit: MAX_LIVE_TOKENS,
    used: outcome.live,
  });
}

/** Tells every gateway replica the tokens are gone (they also stop trusting an answer after 1 s, whether or not this arrives). */
async function announceRevoked(this: TokensThis, ctx: Context, revoked: { id: string; clientId: string }[]): Promise<void> {
  if (!revoked.length) return;
  await ctx.broadcast(TOKEN_REVOKED, { tokens: revoked }).catch((err: Error) => this.logger.warn(`${TOKEN_REVOKED} not broadcast: ${err.message}`));
}

export const tokenActions: ServiceActionsSchema = {
  createToken: {
    rest: "POST /tokens",
    auth: "jwt", // a leaked key or token must not mint tokens
    scope: "none",
    openapi: {
      tag: "auth",
      summary: "Create a restricted token (cit_…): only its scopes, models and databases, until it expires",
      description: `Requires a JWT. The token is shown once only. At most ${MAX_LIVE_TOKENS} live tokens per account (jobs' tokens not counted): 403 QUOTA_EXCEEDED (resource \`tokens\`).`,
      status: 201,
      response: CreatedToken,
      errors: ["VALIDATION_FAILED", "QUOTA_EXCEEDED"],
    },
    params: CREATE_TOKEN_PARAMS,
    async handler(this: TokensThis, ctx: Context<CreateTokenParams, CallerMeta>): Promise<CreatedToken> {
      const p = ctx.params;
      const created = await mint.call(
        this,
        {
          clientId: ctx.meta.caller!.clientId,
          name: p.name,
          scopes: p.scopes,
          models: p.models ?? null,
          databases: p.databases?.map((d) => d.toLowerCase()) ?? null,
          expiresInSeconds: p.expiresInSeconds ?? DEFAULT_TOKEN_TTL_S,
          maxCredits: p.maxCredits ?? null,
          jobId: null,
        },
        MAX_LIVE_TOKENS,
      );
      respondCreated(ctx.meta, "/api/auth/tokens");
      return created;
    },
  },

  listTokens: {
    rest: "GET /tokens",
    scope: "none",
    openapi: { tag: "auth", summary: "The account's live restricted tokens (never the token itself), jobs' tokens included", status: 200, response: TokenList },
    params: { $$strict: "remove" },
    async handler(this: TokensThis, ctx: Context<unknown, CallerMeta>): Promise<TokenList> {
      return { tokens: (await this.tokens.list(ctx.meta.caller!.clientId)).map(infoView) };
    },
  },

  deleteToken: {
    rest: "DELETE /tokens/:id",
    scope: "none",
    openapi: {
      tag: "auth",
      summary: "Delete a restricted token: it is refused (401) within 1 s everywhere",
      status: 200,
      response: Message,
      errors: ["NOT_FOUND"],
    },
    params: TOKEN_ID_PARAMS,
    async handler(this: TokensThis, ctx: Context<{ id: string }, CallerMeta>): Promise<Message> {
      const clientId = ctx.meta.caller!.clientId;
      if (!isUuid(ctx.params.id) || !(await this.tokens.delete(clientId, ctx.params.id.toLowerCase()))) throw notFound("Token");
      await announceRevoked.call(this, ctx, [{ id: ctx.params.id.toLowerCase(), clientId }]);
      return { message: "Token deleted" };
    },
  },

  /** Internal: a token for a job's platformAccess (name `job <jobId>`, not counted in the account's live tokens). */
  issueJobToken: {
    visibility: "public",
    callers: ["gpu-scheduler"],
    params: ISSUE_JOB_TOKEN_PARAMS,
    async handler(this: TokensThis, ctx: Context<IssueJobTokenParams>): Promise<{ id: string; token: string }> {
      const p = ctx.params;
      const jobId = p.jobId.toLowerCase();
      const { id, token } = await mint.call(
        this,
        {
          clientId: p.clientId.toLowerCase(),
          name: `job ${jobId}`,
          scopes: p.scopes,
          models: p.models ?? null,
          databases: p.databases?.map((d) => d.toLowerCase()) ?? null,
          expiresInSeconds: p.expiresInSeconds,
          maxCredits: null,
          jobId,
        },
        null,
      );
      return { id, token };
    },
  },

  /** Internal: deletes a job's tokens (idempotent); refused everywhere within 1 s, as DELETE /tokens/:id. */
  revokeJobTokens: {
    visibility: "public",
    callers: ["gpu-scheduler"],
    params: JOB_TOKENS_PARAMS,
    async handler(this: TokensThis, ctx: Context<{ jobId: string }>): Promise<{ revoked: number }> {
      const gone = await this.tokens.deleteForJob(ctx.params.jobId.toLowerCase());
      await announceRevoked.call(
        this,
        ctx,
        gone.map((t) => ({ id: t.id, clientId: t.client_id })),
      );
      return { revoked: gone.length };
    },
  },

  /** Internal: credits tokens spent on inference (priced as the usage service prices them), reported in batches by inference. */
  addTokenCredits: {
    visibility: "public",
    callers: ["inference"],
    params: TOKEN_CREDITS_PARAMS,
    async handler(this: TokensThis, ctx: Context<TokenCreditsParams>): Promise<void> {
      await this.tokens.addCredits(ctx.params.spent);
    },
  },

  /** Internal: tokens' credit limits and use, expired ones included (a deleted token is absent): batch lines charge their token (inference). */
  tokenCredits: {
    visibility: "public",
    callers: ["inference"],
    params: TOKEN_IDS_PARAMS,
    async handler(this: TokensThis, ctx: Context<{ ids: string[] }>): Promise<TokenCredits[]> {
      return this.tokens.credits(ctx.params.ids);
    },
  },

  /** Internal: the gateway's token check, by the token's SHA-256. Null for an unknown, deleted or expired token. */
  resolveToken: {
    visibility: "public",
    callers: ["api-gateway"],
    params: { tokenHash: { type: "string", length: 64, pattern: KEY_HASH_PATTERN } },
    async handler(this: TokensThis, ctx: Context<{ tokenHash: string }>): Promise<ResolvedToken | null> {
      const row = await this.tokens.findByHash(ctx.params.tokenHash);
      if (!row) return null;
      this.tokenUse.note(row.id, new Date());
      return {
        caller: { clientId: row.client_id, role: row.role, via: "token", token: limitsOf(row) },
        expiresAt: iso(row.expires_at)!,
        maxCredits: row.max_credits,
        creditsUsed: row.credits_used,
      };
    },
  },
};
