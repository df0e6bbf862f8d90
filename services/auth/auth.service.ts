/**
 * Client accounts: register, login, API keys, and resolving an API key into a caller for the
 * gateway. Passwords are scrypt hashes; API keys are stored as SHA-256 and looked up on every
 * request, so a rotated key stops working at once on every replica (nothing caches them).
 */
import { randomUUID } from "crypto";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { config } from "../../lib/config";
import { apiError, rateLimited, unauthorized } from "../../lib/errors";
import { Caller, CallerMeta, respondCreated } from "../../lib/identity";
import { signAccessToken } from "../../lib/jwt";
import { MemoryRateLimiter, RateLimiter, RedisRateLimiter } from "../../lib/rate-limiter";
import { acquireRedis, releaseRedis } from "../../lib/redis";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { API_KEY_PATTERN, generateApiKey, hashApiKey } from "./api-keys";
import { ClientsRepository, PublicClient, toPublicClient } from "./clients.repository";
import { migrations } from "./migrations";
import { hashPassword, verifyPassword } from "./passwords";

export interface RegisterParams {
  email: string;
  name: string;
  password: string;
}
export interface LoginParams {
  email: string;
  password: string;
}
export type AuthResult = { accessToken: string; client: PublicClient };

type AuthThis = Service &
  DbThis & {
    clients: ClientsRepository;
    limiter: RateLimiter;
    dummyHash: Promise<string>;
    throttle(ctx: Context<unknown, CallerMeta>, email: string): Promise<void>;
    issue(client: PublicClient): AuthResult;
  };

const INVALID_LOGIN = "Invalid e-mail or password";

const AuthService: ServiceSchema<ServiceSettingSchema, AuthThis> = {
  name: "auth",
  mixins: [DbMixin({ schema: "auth", migrations })],

  settings: {
    rest: "/auth",
  },

  actions: {
    register: {
      rest: "POST /register",
      auth: "public",
      params: {
        $$strict: "remove",
        email: { type: "email", normalize: true, max: 254 },
        name: { type: "string", trim: true, min: 1, max: 100 },
        password: { type: "string", min: 8, max: 128 },
      },
      async handler(this: AuthThis, ctx: Context<RegisterParams, CallerMeta>): Promise<AuthResult> {
        const { email, name, password } = ctx.params;
        await this.throttle(ctx, email);
        const client = await this.clients.insert({
          id: randomUUID(),
          email,
          name,
          password_hash: await hashPassword(password, config.scryptLogN()),
        });
        if (!client) throw apiError("EMAIL_TAKEN", "An account with this e-mail already exists");
        respondCreated(ctx.meta, "/api/auth/me");
        return this.issue(client);
      },
    },

    login: {
      rest: "POST /login",
      auth: "public",
      params: {
        $$strict: "remove",
        email: { type: "string", trim: true, min: 1, max: 254 },
        password: { type: "string", min: 1, max: 1024 },
      },
      async handler(this: AuthThis, ctx: Context<LoginParams, CallerMeta>): Promise<AuthResult> {
        const email = ctx.params.email.toLowerCase();
        await this.throttle(ctx, email);
        const row = await this.clients.findByEmail(email);
        // Hash even for an unknown e-mail, so the answer and its timing say nothing about it.
        const ok = await verifyPassword(ctx.params.password, row?.password_hash ?? (await this.dummyHash));
        if (!row || !ok) throw unauthorized(INVALID_LOGIN);
        return this.issue(toPublicClient(row));
      },
    },

    me: {
      rest: "GET /me",
      auth: "required",
      async handler(this: AuthThis, ctx: Context<unknown, CallerMeta>): Promise<PublicClient> {
        const client = await this.clients.findById(ctx.meta.caller!.clientId);
        if (!client) throw unauthorized("The account of these credentials no longer exists");
        return client;
      },
    },

    createApiKey: {
      rest: "POST /api-keys",
      auth: "jwt", // a leaked key must not be able to mint its successor
      params: { $$strict: "remove" },
      async handler(this: AuthThis, ctx: Context<unknown, CallerMeta>): Promise<{ apiKey: string }> {
        const apiKey = generateApiKey();
        await this.clients.setApiKey(ctx.meta.caller!.clientId, hashApiKey(apiKey));
        respondCreated(ctx.meta, "/api/auth/me");
        return { apiKey };
      },
    },

    /** Internal: the gateway's API key check. Returns null for an unknown or revoked key. */
    resolveApiKey: {
      visibility: "public",
      params: { key: { type: "string", max: 64 } },
      async handler(this: AuthThis, ctx: Context<{ key: string }>): Promise<Caller | null> {
        if (!API_KEY_PATTERN.test(ctx.params.key)) return null;
        const found = await this.clients.findByApiKeyHash(hashApiKey(ctx.params.key));
        return found ? { clientId: found.id, role: found.role, via: "apiKey" } : null;
      },
    },
  },

  methods: {
    /** Register and login: limited per client address and per e-mail. */
    async throttle(this: AuthThis, ctx: Context<unknown, CallerMeta>, email: string) {
      const windowS = config.authRateWindowS();
      const checks = await Promise.all([
        this.limiter.hit(`ip:${ctx.meta.clientIp ?? "internal"}`, config.authRateLimitPerIp(), windowS),
        this.limiter.hit(`email:${email.toLowerCase()}`, config.authRateLimitPerEmail(), windowS),
      ]);
      const refused = checks.filter((c) => !c.allowed);
      if (refused.length) throw rateLimited(Math.max(...refused.map((c) => c.retryAfterS)));
    },

    issue(this: AuthThis, client: PublicClient): AuthResult {
      return { accessToken: signAccessToken(client.id, client.role), client: toPublicClient(client) };
    },
  },

  created(this: AuthThis) {
    this.clients = new ClientsRepository(this.db);
    const redisUrl = config.redisUrl();
    this.limiter = redisUrl
      ? new RedisRateLimiter(acquireRedis(redisUrl), `${config.namespace() || "ci"}:auth-rate`)
      : new MemoryRateLimiter();
    this.dummyHash = hashPassword(randomUUID(), config.scryptLogN());
  },

  async stopped(this: AuthThis) {
    const redisUrl = config.redisUrl();
    if (redisUrl) await releaseRedis(redisUrl);
  },
};

export default AuthService;
