/**
 * Durable channels (@moleculer/channels) for what must not be lost, such as job events from
 * gpu-nodes to the scheduler. On NATS they are JetStream streams (file storage, work-queue
 * retention: a message stays until a consumer acknowledged it); with no NATS (one process, the
 * in-process bus) they are in-memory.
 *
 * Pitfalls of @moleculer/channels on JetStream handled here: the stream is created up front (by
 * the consumer's process: publishers need no JetStream admin rights), since left to the adapter it
 * exists only once a consumer subscribed and publishing before that fails (NATS 503); consumers
 * start at `deliver_policy: all` so a new durable consumer also gets what was published before it;
 * failed messages are retried and then dead-lettered instead of dropped; and the adapter's
 * "in progress" acknowledgement before every handler call is not sent (QuietProgressNats).
 *
 * Per-sender channels: a publisher sends on `<channel>.<its node id>` and the consumer takes
 * `<channel>.>`; NATS permissions let a gpu-node publish only on its own subject, so the subject
 * tells the consumer who really sent a message (`channelSender`). A channel may cap each sender's
 * unprocessed messages (SENDER_CAPS): past the cap the server refuses that sender's publishes
 * (the sender retries later), so one flooding sender neither buries the others' messages in the
 * stream nor fills its storage.
 */
import { Adapters, Middleware as ChannelsMiddleware } from "@moleculer/channels";
import type { ChannelSchema, Middleware, Service, ServiceBroker } from "moleculer";
import { connect, ConnectionOptions, DiscardPolicy, RetentionPolicy, StorageType, type StreamConfig } from "nats";
import { JOB_EVENTS_CHANNEL, MAX_UNAPPLIED_EVENTS_PER_NODE } from "./gpu-protocol";
import { BusSetup, BusSettings, busSettings, hasCredentials, isNatsUrl, natsConnectionOptions as connectionOptions } from "./bus-connection";
import { platformSettingsOf, type PlatformSettings } from "./platform-settings";

export const DEAD_LETTER_CHANNEL = "dead-letter";

const STREAM_CONFIG = {
  storage: StorageType.File,
  retention: RetentionPolicy.Workqueue,
  max_age: 7 * 24 * 3600 * 1e9, // nanoseconds: a week of undelivered events at most
};

/** Per-sender channels whose senders are untrusted: at most this many unprocessed messages per sender. */
const SENDER_CAPS: Readonly<Record<string, number>> = { [JOB_EVENTS_CHANNEL]: MAX_UNAPPLIED_EVENTS_PER_NODE };

/** A channel's stream settings for its cap, if any: at most N messages per subject (per sender), the server refuses more. */
function senderCap(channel: string): Partial<StreamConfig> {
  const max = SENDER_CAPS[channel];
  return max === undefined ? {} : { max_msgs_per_subject: max, discard: DiscardPolicy.New, discard_new_per_subject: true };
}

/** NATS URL for channels: CHANNELS_URL, else the transporter when it is NATS, else none. */
export function channelsNatsUrl(settings: Pick<PlatformSettings, "channelsUrl" | "transporter">): string | undefined {
  const explicit = settings.channelsUrl;
  if (explicit) return isNatsUrl(explicit) ? explicit : undefined;
  const transporter = settings.transporter;
  return isNatsUrl(transporter) ? transporter : undefined;
}

/** nats.js options for a channels URL (credentials in the URL, else NATS_USER/NATS_PASSWORD; TLS). */
export function natsConnectionOptions(urls: string, settings: BusSettings = {}): ConnectionOptions {
  return connectionOptions(urls, settings);
}

/** Channels' connection: the same user, TLS and private inbox (`_INBOX.<node id>`, when authenticated) as the transporter's. */
function channelsConnection(url: string, settings: PlatformSettings, nodeID?: string): ConnectionOptions {
  const own = natsConnectionOptions(url, busSettings(settings));
  return nodeID && hasCredentials(own) ? { ...own, inboxPrefix: `_INBOX.${nodeID}` } : own;
}

function prefixed(namespace: string, channel: string): string {
  return namespace ? `${namespace}.${channel}` : channel;
}

const streamName = (namespace: string, channel: string) => prefixed(namespace, channel).split(".").join("_");

/** A durable channel subscription on a service's schema (@moleculer/channels reads `channels`); `This`: the service. */
export type ChannelDef<This, Raw = unknown> = {
  group: string;
  maxInFlight: number;
  maxRetries?: number;
  nats?: { consumerOptions: { config: Record<string, unknown> } };
  handler(this: This, payload: unknown, raw?: Raw): Promise<void>;
};

/** The channel key a consumer of a per-sender channel declares. */
export const perSenderChannel = (channel: string): string => `${channel}.>`;

/** Publishes on `channel` under this node's own subject. */
export const ownChannel = (channel: string, nodeID: string): string => `${channel}.${nodeID}`;

/** The node id a per-sender channel message was published under, from its NATS subject. */
export function channelSender(namespace: string, channel: string, subject: string | undefined): string | undefined {
  const base = prefixed(namespace, channel) + ".";
  return subject?.startsWith(base) ? subject.slice(base.length) : undefined;
}

/**
 * Per-sender channel keys end in `.>`, which a JetStream stream name cannot hold: name their
 * stream explicitly (per namespace) before @moleculer/channels reads the service's channels.
 * In-memory channels are Moleculer events, whose wildcard is `**`.
 */
function adaptPerSenderChannels(svc: Service, onNats: boolean): void {
  const channels = svc.schema.channels;
  if (!channels) return;
  const namespace = svc.broker.namespace;
  const renamed: Record<string, ChannelSchema> = {};
  for (const [key, def] of Object.entries(channels)) {
    if (!key.endsWith(".>") || typeof def !== "object" || def === null) {
      renamed[key] = def;
      continue;
    }
    const channel = key.slice(0, -2);
    if (!onNats) {
      renamed[`${channel}.**`] = def;
      continue;
    }
    // The same settings as ensureChannelStreams gives the stream, whichever of the two creates it.
    const streamConfig = {
      ...STREAM_CONFIG,
      ...senderCap(channel),
      ...def.nats?.streamConfig,
      name: streamName(namespace, channel),
      subjects: [prefixed(namespace, key)],
    };
    renamed[key] = { ...def, nats: { ...def.nats, streamConfig } };
  }
  // A copy per service instance: several brokers (namespaces) may share one schema object.
  svc.schema = { ...svc.schema, channels: renamed };
}

type ConsumerCallback = (err: unknown, message: { working(): void } | null) => Promise<void>;

/**
 * The NATS adapter without its `working()` call: it sends JetStream an "in progress" ack before
 * every handler call, one more bus message per event than the ack itself, and only matters for a
 * handler that runs past the consumer's ack wait (30 s). Ours apply an event in milliseconds, and
 * a redelivered event changes nothing (the applier's compare-and-set), so the message is not worth
 * its cost (issue 34: bus messages per job).
 */
export class QuietProgressNats extends Adapters.NATS {
  /**
   * Two replicas of a service starting at once both create the channel's durable consumer, each
   * with its own delivery subject: the later create fails with "consumer name already in use"
   * (JetStream 10013) and the process stopped. Subscribing again binds to the consumer made.
   */
  override async subscribe(chan: { id: string }): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await (super.subscribe as (c: unknown) => Promise<void>).call(this, chan);
      } catch (err) {
        if (attempt >= 3 || !/consumer name already in use/.test((err as Error).message)) throw err;
        (this as unknown as { activeMessages: Map<string, unknown> }).activeMessages.delete(chan.id);
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }

  override createConsumerHandler(chan: unknown): ConsumerCallback {
    const handle = (super.createConsumerHandler as (chan: unknown) => ConsumerCallback).call(this, chan);
    return (err, message) => handle(err, message && Object.create(message, { working: { value: () => undefined } }));
  }
}

export function createChannelsMiddleware(settings: PlatformSettings, bus?: Pick<BusSetup, "nodeID">): Middleware {
  const url = channelsNatsUrl(settings);
  const common = {
    maxRetries: 5,
    maxInFlight: 16,
    deadLettering: { enabled: true, queueName: DEAD_LETTER_CHANNEL },
  };
  const adapter = url
    ? new QuietProgressNats({
        ...common,
        nats: {
          connectionOptions: channelsConnection(url, settings, bus?.nodeID),
          streamConfig: STREAM_CONFIG,
          consumerOptions: { config: { deliver_policy: "all" } },
        },
      } as never)
    : { type: "Fake", options: common };
  // The package's types are loose about adapter options.
  const inner = ChannelsMiddleware({ adapter } as never) as unknown as Middleware & { serviceCreated?(svc: Service): unknown };
  return {
    ...inner,
    serviceCreated(svc: Service) {
      adaptPerSenderChannels(svc, Boolean(url));
      return inner.serviceCreated?.call(this, svc);
    },
  } as Middleware;
}

/**
 * Creates the JetStream streams behind `channels` (and the dead-letter stream) if missing, so a
 * publisher can send before any consumer has subscribed. A channel's stream takes its subject
 * and every per-sender subject under it, with its cap per sender if it has one. No-op without NATS.
 */
export async function ensureChannelStreams(broker: ServiceBroker, channels: string[]): Promise<void> {
  const settings = platformSettingsOf(broker);
  const url = channelsNatsUrl(settings);
  if (!url) return;
  const namespace = broker.namespace;
  const nc = await connect(channelsConnection(url, settings, broker.nodeID));
  try {
    const jsm = await nc.jetstreamManager();
    for (const channel of channels) await addStream(jsm, streamName(namespace, channel), [prefixed(namespace, perSenderChannel(channel))], senderCap(channel));
    await addStream(jsm, streamName(namespace, DEAD_LETTER_CHANNEL), [prefixed(namespace, DEAD_LETTER_CHANNEL)], {});
  } finally {
    await nc.close();
  }
}

type StreamManager = Awaited<ReturnType<Awaited<ReturnType<typeof connect>>["jetstreamManager"]>>;

async function addStream(jsm: StreamManager, name: string, subjects: string[], limits: Partial<StreamConfig>): Promise<void> {
  try {
    await jsm.streams.add({ name, subjects, ...STREAM_CONFIG, ...limits });
  } catch (err) {
    if (!/already in use/.test((err as Error).message)) throw err;
    // A stream from before per-sender subjects or limits: keep its old subjects (undelivered events), add the new ones and the limits.
    const { config: current } = await jsm.streams.info(name);
    const missing = subjects.filter((s) => !current.subjects?.includes(s));
    const stale = Object.entries(limits).some(([key, value]) => current[key as keyof StreamConfig] !== value);
    if (missing.length || stale) await jsm.streams.update(name, { ...current, ...limits, subjects: [...(current.subjects ?? []), ...missing] });
  }
}

/** Publishes `payload` on a durable channel (resolves once the server has stored it). */
export function sendToChannel(broker: ServiceBroker, channel: string, payload: unknown): Promise<void> {
  return broker.sendToChannel(channel, payload);
}
