/**
 * Client accounts: register, login, API keys, and resolving an API key into a caller for the
 * gateway (that and the other internal look-ups: account-lookups.ts). Passwords are scrypt
 * hashes; API keys are stored as SHA-256. A gateway trusts auth's answer for a key at most 1 s
 * (caller-resolver.ts), so a rotated key stops within 1 s on every replica, and at once where
 * the `apiKey.replaced` broadcast arrives. The gateway sends only a key's SHA-256: the key
 * itself never crosses the bus.
 *
 * Login limits (throttle.ts): every attempt counts per client address; failures count per
 * (e-mail, address) pair, so a third party failing from elsewhere cannot lock the owner out.
 */
import { randomBytes, randomUUID } from "crypto";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { platformSettingsOf } from "../../lib/platform-settings";
import { brokerEnv } from "../../lib/settings";
import { apiError, rateLimited, unauthorized, validationFailed } from "../../lib/errors";
import { respondCreated } from "../../lib/http-meta";
import { ADMIN_ROLE, CallerMeta, CLIENT_ROLE } from "../../lib/identity";
import { signAccessToken } from "../../lib/jwt";
import { API_KEY_REPLACED, TOKEN_REVOKED } from "../../lib/event-names";
import { AuthSettings, parseAuthSettings } from "./settings";
import { MemoryRateLimiter, RedisRateLimiter } from "../../lib/rate-limiter";
import { acquireRedis, releaseRedis } from "../../lib/redis";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { accountLookupActions } from "./account-lookups";
import { generateApiKey, hashApiKey } from "./api-keys";
import { ClientsRepository, toPublicClient } from "./clients.repository";
import { ApiKeyResult, AuthResult, Client, PublicClient, WebhookSecretResult } from "./contract";
import { emailProblem, normalizeEmail } from "./email";
import { migrations } from "./migrations";
import { lastUseBatch, tokenActions, TokensThis } from "./token-actions";
import { TokensRepository } from "./tokens.repository";
import { HashGate } from "./hash-gate";
import { hashPassword, verifyPassword } from "./passwords";
import { LoginThrottle } from "./throttle";

export interface RegisterParams {
  email: string;
  name: string;
  password: string;
}
export interface LoginParams {
  email: string;
  password: string;
}

type AuthThis = Service &
  DbThis &
  TokensThis & {
    config: AuthSettings;
    redisUrl?: string;
    clients: ClientsRepository;
    throttle: LoginThrottle;
    hashGate: HashGate;
    dummyHash: Promise<string>;
    refuseIfLimited(decision: { allowed: boolean; retryAfterS: number }): void;
    issue(client: PublicClient): AuthResult;
    roleFor(normalizedEmail: string | null): string;
  };

const INVALID_LOGIN = "Invalid e-mail or password";

/**
 * The e-mail's normalised form (email.ts), or 400 naming `email`. Login refuses invisible characters
 * only: any other string is just an e-mail no account has (the same 401 as a wrong password).
 */
function normalizedEmail(raw: string, opts: { invisibleOnly?: boolean } = {}): string {
  const problem = emailProblem(raw, opts);
  if (problem) throw validationFailed([{ field: "email", message: problem }]);
  return normalizeEmail(raw);
}

const AuthService: ServiceSchema<ServiceSettingSchema, AuthThis> = {
  name: "auth",
  mixins: [DbMixin({ schema: "auth", migrations })],
  // Every gateway replica caches answers for keys (at most 1 s), hence a broadcast.
  emits: [
    { event: API_KEY_REPLACED, kind: "broadcast" },
    { event: TOKEN_REVOKED, kind: "broadcast" },
  ],

  settings: {
    rest: "/auth",
  },

  actions: {
    register: {
      rest: "POST /register",
      auth: "public",
      openapi: {
        tag: "auth",
        summary: "Register a client account",
        status: 201,
        response: AuthResult,
        errors: ["EMAIL_TAKEN", "RATE_LIMITED", "SERVICE_UNAVAILABLE"],
      },
      params: {
        $$strict: "remove",
        email: { type: "email", normalize: true, max: 254 },
        name: { type: "string", trim: true, min: 1, max: 100 },
        password: { type: "string", min: 8, max: 128 },
      },
      async handler(this: AuthThis, ctx: Context<RegisterParams, CallerMeta>): Promise<AuthResult> {
        const { name, password } = ctx.params;
        const email = normalizedEmail(ctx.params.email);
        this.refuseIfLimited(await this.throttle.register(email, ctx.meta.clientIp));
        const client = await this.clients.insert({
          id: randomUUID(),
          email,
          name,
          password_hash: await this.hashGate.run(() => hashPassword(password, this.config.scryptLogN)),
          role: this.roleFor(email),
        });
        if (!client) throw apiError("EMAIL_TAKEN", "An account with this e-mail already exists");
        respondCreated(ctx.meta, "/api/auth/me");
        return this.issue(client);
      },
    },

    login: {
      rest: "POST /login",
      auth: "public",
      openapi: {
        tag: "auth",
        summary: "Log in (a fresh 24-hour JWT)",
        description: "A wrong e-mail and a wrong password answer the same 401.",
        status: 200,
        response: AuthResult,
        errors: ["UNAUTHORIZED", "RATE_LIMITED", "SERVICE_UNAVAILABLE"],
      },
      params: {
        $$strict: "remove",
        email: { type: "string", trim: true, min: 1, max: 254 },
        password: { type: "string", min: 1, max: 1024 },
      },
      async handler(this: AuthThis, ctx: Context<LoginParams, CallerMeta>): Promise<AuthResult> {
        const email = normalizedEmail(ctx.params.email, { invisibleOnly: true });
        const address = ctx.meta.clientIp;
        this.refuseIfLimited(await this.throttle.beforeLogin(email, address));
        const row = await this.clients.findForLogin(email, ctx.params.email);
        // Hash even for an unknown e-mail, so the answer and its timing say nothing about it.
        const stored = row?.password_hash ?? (await this.dummyHash);
        const ok = await this.hashGate.run(() => verifyPassword(ctx.params.password, stored));
        if (!row || !ok) {
          await this.throttle.loginFailed(email, address);
          throw unauthorized(INVALID_LOGIN);
        }
        // ADMIN_EMAILS decides the role at every login: removing an e-mail from it demotes the account.
        const role = this.roleFor(row.email_normalized);
        if (role !== row.role) await this.clients.setRole(row.id, role);
        return this.issue(toPublicClient({ ...row, role }));
      },
    },

    me: {
      rest: "GET /me",
      auth: "required",
      scope: "any", // a token may say whose it is
      openapi: { tag: "auth", summary: "The calling client", status: 200, response: Client },
      async handler(this: AuthThis, ctx: Context<unknown, CallerMeta>): Promise<PublicClient> {
        const client = await this.clients.findById(ctx.meta.caller!.clientId);
        if (!client) throw unauthorized("The account of these credentials no longer exists");
        return client;
      },
    },

    createApiKey: {
      rest: "POST /api-keys",
      auth: "jwt", // a leaked key must not be able to mint its successor
      openapi: {
        tag: "auth",
        summary: "Create an API key (invalidates the previous one)",
        description: "Requires a JWT: an API key gets 403. The key is shown once only.",
        status: 201,
        response: ApiKeyResult,
      },
      params: { $$strict: "remove" },
      async handler(this: AuthThis, ctx: Context<unknown, CallerMeta>): Promise<ApiKeyResult> {
        const apiKey = generateApiKey();
        const clientId = ctx.meta.caller!.clientId;
        await this.clients.setApiKey(clientId, hashApiKey(apiKey));
        // The key is replaced already: a lost event only leaves the old key its last second (the gateways' bound).
        await ctx.broadcast(API_KEY_REPLACED, { clientId }).catch((err: Error) => this.logger.warn(`${API_KEY_REPLACED} not broadcast: ${err.message}`));
        respondCreated(ctx.meta, "/api/auth/me");
        return { apiKey };
      },
    },

    /** The account's webhook signing secret (Standard Webhooks), shown once; a new one replaces the old at once. */
    createWebhookSecret: {
      rest: "POST /webhook-secret",
      auth: "jwt", // as api-keys: a leaked API key must not be able to take over the account's webhooks
      openapi: {
        tag: "auth",
        summary: "Create the webhook signing secret (replaces the previous one)",
        description:
          "Requires a JWT: an API key gets 403. Webhooks of the account's jobs are signed with it from now on " +
          "(headers webhook-id, webhook-timestamp, webhook-signature: Standard Webhooks). Shown once only.",
        status: 201,
        response: WebhookSecretResult,
      },
      params: { $$strict: "remove" },
      async handler(this: AuthThis, ctx: Context<unknown, CallerMeta>): Promise<WebhookSecretResult> {
        const webhookSecret = `whsec_${randomBytes(32).toString("base64")}`;
        await this.clients.setWebhookSecret(ctx.meta.caller!.clientId, webhookSecret);
        respondCreated(ctx.meta, "/api/auth/me");
        return { webhookSecret };
      },
    },

    ...accountLookupActions,
    ...tokenActions,
  },

  methods: {
    refuseIfLimited(this: AuthThis, decision: { allowed: boolean; retryAfterS: number }) {
      if (!decision.allowed) throw rateLimited(decision.retryAfterS);
    },

    /** Null (a look-alike left without a normalised e-mail by migration 3) is never an admin. */
    roleFor(this: AuthThis, normalizedEmail: string | null): string {
      return normalizedEmail !== null && this.config.adminEmails.has(normalizedEmail) ? ADMIN_ROLE : CLIENT_ROLE;
    },

    issue(this: AuthThis, client: PublicClient): AuthResult {
      return { accessToken: signAccessToken(client.id, client.role, this.config.jwtSecret), client: toPublicClient(client) };
    },
  },

  created(this: AuthThis) {
    this.clients = new ClientsRepository(this.db);
    this.tokens = new TokensRepository(this.db);
    this.tokenUse = lastUseBatch(this.tokens, (m) => this.logger.warn(m));
    this.config = parseAuthSettings(brokerEnv(this.broker));
    const platform = platformSettingsOf(this.broker);
    const redisUrl = (this.redisUrl = platform.redisUrl);
    const limiter = redisUrl ? new RedisRateLimiter(acquireRedis(redisUrl), `${platform.namespace || "ci"}:auth-rate`) : new MemoryRateLimiter();
    this.throttle = new LoginThrottle(limiter, {
      perAddress: this.config.rateLimitPerIp,
      perEmail: this.config.rateLimitPerEmail,
      windowS: this.config.rateWindowS,
    });
    this.hashGate = new HashGate(this.config.hashConcurrency, this.config.hashQueue);
    this.dummyHash = this.hashGate.run(() => hashPassword(randomUUID(), this.config.scryptLogN));
  },

  async started(this: AuthThis) {
    this.tokenUse.start();
    const unkeyed = await this.clients.countWithoutNormalizedEmail();
    if (unkeyed)
      this.logger.warn(
        `${unkeyed} account(s) registered before e-mails were normalised look like an older account's e-mail: they log in by their exact e-mail only and never get admin`,
      );
  },

  async stopped(this: AuthThis) {
    await this.tokenUse.stop();
    if (this.redisUrl) await releaseRedis(this.redisUrl);
  },
};

export default AuthService;
