/**
 * usage: one account, one bill. The ledger of what each account used (GPU-seconds, tokens,
 * storage MB-hours), fed by the owners of each resource over the durable channel USAGE_CHANNEL
 * (lib/usage-protocol.ts); GET /api/usage and GET /api/quotas; per-account quota overrides; and
 * the internal `standing` the enforcing services (gpu-scheduler, inference, dbaas) ask, cached
 * on their side (lib/quota-gate.ts).
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { channelSender, ensureChannelStreams, perSenderChannel } from "../../lib/channels";
import { roleOfNodeID } from "../../lib/bus-identity";
import { notFound, validationFailed } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
import { RefusalLog } from "../../lib/refusal-log";
import { brokerEnv } from "../../lib/settings";
import { checkUsageBatch, Quota, Standing, USAGE_CHANNEL, USAGE_OWNERS } from "../../lib/usage-protocol";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import { QuotaList, Usage } from "./contract";
import { LedgerRepository } from "./ledger.repository";
import { migrations } from "./migrations";
import { OverridesRepository } from "./overrides.repository";
import { parseUsageSettings, UsageSettings } from "./settings";
import { UsageReader } from "./reader";
import { NOTHING_NOW, OVERRIDABLE, Overrides, summarize, UsageSummary } from "./summary";
import type { UsageStats } from "./stats";

type AdminClient = { id: string; email: string; name: string; role: string };
export type AdminAccount = AdminClient & { usage: UsageSummary; quotas: Quota[]; overrides: Overrides };

const limitParam = (rule: Record<string, unknown>) => ({ ...rule, optional: true, nullable: true });
/** The largest monthly limit (credits, GPU-seconds, tokens: far beyond any use, inside bigint; 1e400 parses as Infinity). */
const MAX_LIMIT = 1e15;
/** PUT /api/admin/accounts/:id/quotas: each a limit, null for the default. */
export const OVERRIDE_PARAMS = {
  credits: limitParam({ type: "number", min: 0, max: MAX_LIMIT }),
  gpuSeconds: limitParam({ type: "number", min: 0, max: MAX_LIMIT }),
  tokens: limitParam({ type: "number", integer: true, min: 0, max: MAX_LIMIT }),
  databases: limitParam({ type: "number", integer: true, min: 0, max: 100000 }),
  storageMb: limitParam({ type: "number", min: 0, max: 1e12 }),
  runningGpus: limitParam({ type: "number", integer: true, min: 0, max: 100000 }),
  queuedJobs: limitParam({ type: "number", integer: true, min: 0, max: 1000000 }),
  requestsPerMinute: limitParam({ type: "number", integer: true, min: 1, max: 1000000 }),
  tokensPerMinute: limitParam({ type: "number", integer: true, min: 1, max: 1000000000 }),
  fairShareWeight: limitParam({ type: "number", min: 0.001, max: 1000 }),
};

type UsageThis = Service &
  DbThis & {
    config: UsageSettings;
    ledger: LedgerRepository;
    overrides: OverridesRepository;
    reader: UsageReader;
    refusals: RefusalLog;
    adminView(ctx: Context, clients: AdminClient[]): Promise<AdminAccount[]>;
  };

/** The longest window GET /api/usage sums (a year and a day: any calendar year). */
const MAX_WINDOW_MS = 367 * 24 * 3600 * 1000;
const MAX_ACCOUNTS_PER_CALL = 1000;
/** Deliveries of a batch that fails to store (a database outage) before it is dead-lettered. */
const RECORD_MAX_RETRIES = 10;

export type WindowParams = { from?: string; to?: string };

/** [from, to) of GET /api/usage: the given times, by default the current calendar month (UTC) until now; bad ones are 400. */
function windowOf(params: WindowParams, now: Date, monthStart: Date): { from: Date; to: Date } {
  const parse = (field: "from" | "to", fallback: Date) => {
    const raw = params[field];
    if (raw === undefined) return fallback;
    const t = Date.parse(raw);
    if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}/.test(raw))
      throw validationFailed([{ field, message: `The '${field}' field must be an ISO 8601 date-time.` }]);
    return new Date(t);
  };
  const from = parse("from", monthStart);
  const to = parse("to", now);
  if (to <= from) throw validationFailed([{ field: "to", message: "The 'to' field must be after 'from'." }]);
  if (to.getTime() - from.getTime() > MAX_WINDOW_MS) throw validationFailed([{ field: "to", message: "A window may span at most 367 days." }]);
  return { from, to };
}

const UsageService: ServiceSchema<ServiceSettingSchema, UsageThis> = {
  name: "usage",
  mixins: [DbMixin({ schema: "usage", migrations })],

  settings: {
    rest: "/usage",
  },

  actions: {
    summary: {
      rest: "GET /",
      auth: "required",
      scope: "usage:read",
      openapi: {
        tag: "usage",
        summary: "What the account used in a window (default: this calendar month, UTC, until now), with its credits",
        description: "`from` and `to`: ISO 8601 date-times; GPU-seconds count the part of each job's held time inside the window, × its cards.",
        status: 200,
        response: Usage,
      },
      params: { $$strict: "remove", from: { type: "string", optional: true, max: 40 }, to: { type: "string", optional: true, max: 40 } },
      async handler(this: UsageThis, ctx: Context<WindowParams, CallerMeta>): Promise<UsageSummary> {
        const now = new Date();
        const window = windowOf(ctx.params, now, this.reader.month(now).start);
        return this.reader.usage(ctx, ctx.meta.caller!.clientId, window, now);
      },
    },

    quotas: {
      rest: { method: "GET", basePath: "/quotas", path: "/" },
      auth: "required",
      scope: "usage:read",
      openapi: { tag: "usage", summary: "The account's quotas: limit, use and reset of each", status: 200, response: QuotaList },
      async handler(this: UsageThis, ctx: Context<unknown, CallerMeta>): Promise<{ quotas: Quota[] }> {
        return { quotas: (await this.reader.standings(ctx, [ctx.meta.caller!.clientId], new Date()))[0].quotas };
      },
    },

    /** Internal: each account's limits now and the monthly quota it is over (if any), for the services that enforce them. */
    standing: {
      visibility: "public",
      callers: ["gpu-scheduler", "inference", "dbaas"],
      params: { clientIds: { type: "array", items: "uuid", min: 1, max: MAX_ACCOUNTS_PER_CALL } },
      async handler(this: UsageThis, ctx: Context<{ clientIds: string[] }>): Promise<Standing[]> {
        return this.reader.standings(ctx, [...new Set(ctx.params.clientIds)], new Date());
      },
    },

    /** Internal: the platform's all-time totals per resource (no account in them) for Prometheus. */
    stats: {
      visibility: "public",
      callers: ["metrics"],
      async handler(this: UsageThis): Promise<UsageStats> {
        const now = new Date();
        const all = summarize(await this.ledger.platformTotals(), NOTHING_NOW, { from: new Date(0), to: now }, now, this.config.prices);
        return { gpuSeconds: all.gpu.gpuSeconds, tokens: all.inference.tokens, storageMbHours: all.databases.storageMbHours, credits: all.credits };
      },
    },

    /** Internal (admin facade): each account with its usage this month and its quotas, a page at a time in id order. */
    adminAccounts: {
      visibility: "public",
      callers: ["admin"],
      auth: "admin",
      params: {
        $$strict: "remove",
        after: { type: "uuid", optional: true },
        limit: { type: "number", integer: true, min: 1, max: 200, optional: true, convert: true },
      },
      async handler(this: UsageThis, ctx: Context<{ after?: string; limit?: number }>): Promise<{ accounts: AdminAccount[]; nextCursor: string | null }> {
        const limit = ctx.params.limit ?? 50;
        const clients = await ctx.call<AdminClient[], object>("auth.listClients", { after: ctx.params.after, limit });
        const accounts = await this.adminView(ctx, clients);
        return { accounts, nextCursor: clients.length === limit ? clients[clients.length - 1].id : null };
      },
    },

    /** Internal (admin facade): sets an account's overrides (null: back to the default); unknown fields and bad values are 400, nothing changed. */
    adminSetQuotas: {
      visibility: "public",
      callers: ["admin"],
      auth: "admin",
      params: { $$strict: true, id: { type: "uuid" }, ...OVERRIDE_PARAMS },
      async handler(this: UsageThis, ctx: Context<Overrides & { id: string }, CallerMeta>): Promise<AdminAccount> {
        const { id, ...changes } = ctx.params;
        if (!Object.keys(changes).length) throw validationFailed([{ field: "body", message: `Give at least one of: ${OVERRIDABLE.join(", ")}.` }]);
        const [client] = await ctx.call<AdminClient[], object>("auth.listClients", { ids: [id] });
        if (!client) throw notFound("Account");
        const overrides = await this.overrides.set(id, changes, ctx.meta.caller?.clientId ?? "unknown");
        return { ...(await this.adminView(ctx, [client]))[0], overrides };
      },
    },
  },

  methods: {
    /** Accounts with their usage this month, quotas and overrides. */
    async adminView(this: UsageThis, ctx: Context, clients: AdminClient[]): Promise<AdminAccount[]> {
      if (!clients.length) return [];
      const now = new Date();
      const ids = clients.map((c) => c.id);
      const [standings, overrides] = await Promise.all([this.reader.standings(ctx, ids, now), this.overrides.of(ids)]);
      const month = this.reader.month(now);
      return Promise.all(
        clients.map(async (c, i) => ({
          ...c,
          usage: await this.reader.usage(ctx, c.id, { from: month.start, to: now }, now),
          quotas: standings[i].quotas,
          overrides: overrides.get(c.id) ?? {},
        })),
      );
    },
  },

  channels: {
    [perSenderChannel(USAGE_CHANNEL)]: {
      group: "usage",
      maxInFlight: 8,
      maxRetries: RECORD_MAX_RETRIES,
      nats: { consumerOptions: { config: { ack_wait: 10e9 } } },
      /** Throws only when the ledger cannot store the batch, so JetStream redelivers it. */
      async handler(this: UsageThis, payload: unknown, raw?: { subject?: unknown }) {
        const subject = typeof raw?.subject === "string" ? raw.subject : undefined;
        const sender = subject === undefined ? undefined : channelSender(this.broker.namespace, USAGE_CHANNEL, subject);
        const checked = checkUsageBatch(payload);
        if (!checked.ok) return void this.refusals.refused("usage batch", sender ?? subject ?? "this process", checked.field);
        // A participant reports only the resource its role owns (on an authenticated bus the subject names the real sender).
        const role = roleOfNodeID(sender);
        const foreign = role === undefined ? undefined : checked.value.records.find((r) => USAGE_OWNERS[r.resource] !== role);
        if (foreign) return void this.refusals.refused(`usage batch (${foreign.resource} is not reported by ${role})`, sender!, "resource");
        await this.ledger.record(checked.value.records);
      },
    },
  } as ServiceSchema["channels"],

  created(this: UsageThis) {
    this.config = parseUsageSettings(brokerEnv(this.broker));
    this.refusals = new RefusalLog((line) => this.logger.warn(line));
    this.ledger = new LedgerRepository(this.db);
    this.overrides = new OverridesRepository(this.db);
    this.reader = new UsageReader(this.ledger, this.overrides, this.config, (msg) => this.logger.warn(msg));
  },

  async started(this: UsageThis) {
    await ensureChannelStreams(this.broker, [USAGE_CHANNEL]);
  },
};

export default UsageService;
