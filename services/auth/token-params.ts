/** The params of the restricted-token actions (TypeBox, checked by the broker: lib/params-validator.ts). */
import { Type } from "../../lib/contract";
import { TOKEN_SCOPES } from "../../lib/scopes";
import { UUID_PATTERN } from "../../lib/uuid";

/** At most this many live tokens an account made by hand (job tokens are not counted: a job is never refused for it). */
export const MAX_LIVE_TOKENS = 100;
export const DEFAULT_TOKEN_TTL_S = 86_400;
export const MAX_TOKEN_TTL_S = 31_536_000;

const Uuid = Type.String({ pattern: UUID_PATTERN });
const limitFields = {
  scopes: Type.Array(Type.Union(TOKEN_SCOPES.map((s) => Type.Literal(s))), { minItems: 1, maxItems: TOKEN_SCOPES.length, uniqueItems: true }),
  models: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 32, uniqueItems: true })),
  databases: Type.Optional(Type.Array(Uuid, { maxItems: 16, uniqueItems: true })),
};
const Ttl = Type.Integer({ minimum: 60, maximum: MAX_TOKEN_TTL_S });

/** POST /api/auth/tokens. */
export const CREATE_TOKEN_PARAMS = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 64, pattern: "\\S" }),
  ...limitFields,
  expiresInSeconds: Type.Optional(Ttl),
  maxCredits: Type.Optional(Type.Number({ minimum: 0, maximum: 1e12 })),
});
export type CreateTokenParams = { name: string; scopes: string[]; models?: string[]; databases?: string[]; expiresInSeconds?: number; maxCredits?: number };

/** auth.issueJobToken (gpu-scheduler): a token for a job's platformAccess. */
export const ISSUE_JOB_TOKEN_PARAMS = Type.Object({ clientId: Uuid, jobId: Uuid, ...limitFields, expiresInSeconds: Ttl });
export type IssueJobTokenParams = { clientId: string; jobId: string; scopes: string[]; models?: string[]; databases?: string[]; expiresInSeconds: number };

export const TOKEN_ID_PARAMS = Type.Object({ id: Type.String({ maxLength: 64 }) });
export const JOB_TOKENS_PARAMS = Type.Object({ jobId: Uuid });

/** auth.addTokenCredits (inference): credits spent per token since its last report. */
export const TOKEN_CREDITS_PARAMS = Type.Object({
  spent: Type.Array(Type.Object({ id: Uuid, credits: Type.Number({ minimum: 0, maximum: 1e12 }) }), { minItems: 1, maxItems: 1000 }),
});
export type TokenCreditsParams = { spent: Array<{ id: string; credits: number }> };

/** auth.tokenCredits (inference): the credit limits and use of these tokens. */
export const TOKEN_IDS_PARAMS = Type.Object({ ids: Type.Array(Uuid, { minItems: 1, maxItems: 1000 }) });
