/** The auth routes' responses (lib/contract.ts): published in the OpenAPI document and typing the handlers. */
import { Nullable, OrNull, type Static, StringEnum, Type } from "../../lib/contract";
import { TOKEN_SCOPES } from "../../lib/scopes";

export const Client = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    email: Type.String({ format: "email" }),
    name: Type.String(),
    role: Type.String({ examples: ["client"] }),
  },
  { $id: "Client" },
);
export type PublicClient = Static<typeof Client>;

export const AuthResult = Type.Object(
  {
    accessToken: Type.String({ description: "JWT (HS256), valid for 24 hours" }),
    client: Client,
  },
  { $id: "AuthResult" },
);
export type AuthResult = Static<typeof AuthResult>;

export const ApiKeyResult = Type.Object({ apiKey: Type.String({ pattern: "^ci_[a-z0-9]{32}$", description: "Shown once only" }) }, { $id: "ApiKeyResult" });
export type ApiKeyResult = Static<typeof ApiKeyResult>;

export const WebhookSecretResult = Type.Object(
  {
    webhookSecret: Type.String({
      pattern: "^whsec_[A-Za-z0-9+/]{43}=$",
      description: "Standard Webhooks signing secret (base64 of 32 random bytes after `whsec_`); shown once only, replaces the previous one",
    }),
  },
  { $id: "WebhookSecretResult" },
);
export type WebhookSecretResult = Static<typeof WebhookSecretResult>;

const TokenScopes = Type.Array(StringEnum([...TOKEN_SCOPES]), { description: "What the token may do (`:write` includes `:read`)" });
const tokenFields = {
  id: Type.String({ format: "uuid" }),
  name: Type.String(),
  scopes: TokenScopes,
  models: OrNull(Type.Array(Type.String(), { description: "Only these models (null: any)" })),
  databases: OrNull(Type.Array(Type.String(), { description: "Only these databases (null: any)" })),
  expiresAt: Type.String({ format: "date-time" }),
  maxCredits: Nullable(Type.Number({ description: "At this many credits used its requests are 403 QUOTA_EXCEEDED (null: no limit beyond the account's)" })),
  createdAt: Type.String({ format: "date-time" }),
};

export const CreatedToken = Type.Object(
  { ...tokenFields, token: Type.String({ pattern: "^cit_[a-z0-9]{32}$", description: "Shown once only" }) },
  { $id: "CreatedToken" },
);
export type CreatedToken = Static<typeof CreatedToken>;

export const TokenInfo = Type.Object(
  {
    ...tokenFields,
    creditsUsed: Type.Number(),
    lastUsedAt: Nullable(Type.String({ format: "date-time" })),
    jobId: Nullable(Type.String({ format: "uuid", description: "The job it was issued to (platformAccess), null for one made by hand" })),
  },
  { $id: "TokenInfo" },
);
export type TokenInfo = Static<typeof TokenInfo>;

export const TokenList = Type.Object({ tokens: Type.Array(TokenInfo) }, { $id: "TokenList" });
export type TokenList = Static<typeof TokenList>;
