/**
 * The auth service's internal account look-ups over the bus (visibility "public": no REST route),
 * each open only to the services named in its `callers`: the gateway's API key and account checks,
 * the webhook senders' signing secret, and the usage service's account listing.
 */
import type { Context, Service, ServiceActionsSchema } from "moleculer";
import type { Caller } from "../../lib/identity";
import { KEY_HASH_PATTERN } from "./api-keys";
import type { ClientsRepository } from "./clients.repository";
import type { PublicClient } from "./contract";

export type AccountsThis = Service & { clients: ClientsRepository };

export const accountLookupActions: ServiceActionsSchema = {
  /** Internal: the secret that signs the account's webhooks (null: none yet); only their senders (jobs, batches) may ask. */
  webhookSecret: {
    visibility: "public",
    callers: ["gpu-scheduler", "inference"],
    params: { clientId: { type: "uuid" } },
    async handler(this: AccountsThis, ctx: Context<{ clientId: string }>): Promise<{ secret: string | null }> {
      return { secret: await this.clients.webhookSecret(ctx.params.clientId) };
    },
  },

  /** Internal: the gateway's API key check, by the key's SHA-256. Null for an unknown or revoked key. */
  resolveApiKey: {
    visibility: "public",
    callers: ["api-gateway"],
    params: { keyHash: { type: "string", length: 64, pattern: KEY_HASH_PATTERN } },
    async handler(this: AccountsThis, ctx: Context<{ keyHash: string }>): Promise<Caller | null> {
      const found = await this.clients.findByApiKeyHash(ctx.params.keyHash);
      return found ? { clientId: found.id, role: found.role, via: "apiKey" } : null;
    },
  },

  /** Internal: whether a JWT's account exists (the gateway caches positive answers). */
  resolveAccount: {
    visibility: "public",
    callers: ["api-gateway"],
    params: { id: { type: "uuid" } },
    async handler(this: AccountsThis, ctx: Context<{ id: string }>): Promise<{ id: string; role: string } | null> {
      const found = await this.clients.findById(ctx.params.id);
      return found ? { id: found.id, role: found.role } : null;
    },
  },

  /** Internal: accounts in id order (`after`: the last id of the page before), or the given ones; for the admin account routes. */
  listClients: {
    visibility: "public",
    callers: ["usage"],
    params: {
      ids: { type: "array", items: "uuid", optional: true, max: 1000 },
      after: { type: "uuid", optional: true },
      limit: { type: "number", integer: true, min: 1, max: 500, optional: true },
    },
    handler(this: AccountsThis, ctx: Context<{ ids?: string[]; after?: string; limit?: number }>): Promise<PublicClient[]> {
      return this.clients.list(ctx.params);
    },
  },
};
