/**
 * The platform's keys on Moleculer's schemas, typed where Moleculer would read them as `any`, so a
 * misspelt policy does not compile. Policy is data on each action, enforced in one place:
 * `auth` by middlewares/auth.middleware.ts, `callers` by lib/bus-identity.ts (and the NATS
 * permissions built from it). A service's `emits` and `publishes` name what it sends to other
 * processes, the only events and channel messages its NATS user may publish (lib/bus-permissions.ts).
 * `openapi` documents a REST action's route (lib/contract.ts). Also
 * what @moleculer/channels adds: `channels` and sendToChannel.
 */
import type { ServiceRole } from "../lib/bus-identity";
import type { EventDeclaration } from "../lib/bus-permissions";
import type { RouteDoc } from "../lib/contract";
import type { AuthPolicy } from "../lib/identity";
import type { ActionScope } from "../lib/scopes";

declare module "moleculer" {
  interface ActionSchema {
    /** Who may call it: "public", "required" (a JWT or an API key) or "jwt"; REST actions default to "required". */
    auth?: AuthPolicy;
    /**
     * What a restricted token needs to call it (lib/scopes.ts); "none": no token may. Every REST
     * action with auth "required" declares one (test/unit/auth.scopes.test.ts); "jwt" and "admin" refuse tokens anyway.
     */
    scope?: ActionScope;
    /** The roles whose processes may call it over the bus; REST actions default to the gateway, others to none. */
    callers?: readonly ServiceRole[];
    /** Its route in the OpenAPI document (summary, success status and response schema, extra errors); read by the gateway from the registry. */
    openapi?: RouteDoc;
    /**
     * Its answer is a body read over time (a paged or live stream): while open it holds one of its
     * account's GATEWAY_STREAMS_PER_ACCOUNT slots on the gateway (services/api-gateway/stream-slots.ts);
     * `{ param }`: only when that param is true. Data, read by the gateway from the registry.
     */
    streams?: true | { param: string };
  }

  /** A durable channel subscription, read from a service's `channels` by @moleculer/channels (lib/channels.ts). */
  interface ChannelSchema {
    group?: string;
    maxInFlight?: number;
    maxRetries?: number;
    nats?: { streamConfig?: Record<string, unknown>; consumerOptions?: { config?: Record<string, unknown> } };
    /** `raw` is the adapter's message (on NATS, its `subject` names the sender). */
    handler(payload: unknown, raw?: { subject?: unknown }): Promise<void> | void;
  }

  interface ServiceSchema<S = ServiceSettingSchema, T = Service<S>> {
    channels?: Record<string, ChannelSchema>;
    /** The events it broadcasts or emits to other processes; handlers elsewhere are found by their `events` keys. */
    emits?: readonly EventDeclaration[];
    /** The per-sender channels it publishes on (`ownChannel`, lib/channels.ts); consumers are found by their `channels` keys. */
    publishes?: readonly string[];
  }

  interface ServiceBroker {
    /** Added by @moleculer/channels' middleware (lib/channels.ts): publishes on a durable channel. */
    sendToChannel(channel: string, payload: unknown, opts?: Record<string, unknown>): Promise<void>;
  }
}
