/** The auth routes' responses (lib/contract.ts): published in the OpenAPI document and typing the handlers. */
import { type Static, Type } from "../../lib/contract";

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
