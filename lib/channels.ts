/**
 * Durable channels (@moleculer/channels) for what must not be lost, such as job events from
 * gpu-nodes to the scheduler. On NATS they are JetStream streams (file storage, work-queue
 * retention: a message stays until a consumer acknowledged it); with no NATS (one process, the
 * in-process bus) they are in-memory.
 *
 * Pitfalls handled here (see TOOLCHAIN.md): the stream is created up front so publishing before
 * the first consumer exists works; consumers start at `deliver_policy: all` so a new durable
 * consumer also gets what was published before it; failed messages are retried and then
 * dead-lettered instead of dropped.
 */
import { Middleware as ChannelsMiddleware } from "@moleculer/channels";
import type { Middleware, ServiceBroker } from "moleculer";
import { connect, ConnectionOptions, RetentionPolicy, StorageType } from "nats";
import { config } from "./config";

export const DEAD_LETTER_CHANNEL = "dead-letter";

const STREAM_CONFIG = {
  storage: StorageType.File,
  retention: RetentionPolicy.Workqueue,
  max_age: 7 * 24 * 3600 * 1e9, // nanoseconds: a week of undelivered events at most
};

/** NATS URL for channels: CHANNELS_URL, else the transporter when it is NATS, else none. */
export function channelsNatsUrl(): string | undefined {
  const explicit = process.env.CHANNELS_URL;
  if (explicit) return explicit.startsWith("nats://") ? explicit : undefined;
  const transporter = config.transporter();
  return transporter?.startsWith("nats://") ? transporter : undefined;
}

/**
 * nats.js takes bare host:port servers; credentials in the URL (`nats://user:pass@host:4222`
 * or `nats://token@host:4222`) become its user/pass or token options instead of being dropped.
 */
export function natsConnectionOptions(urls: string): ConnectionOptions {
  const parsed = urls.split(",").map((u) => new URL(u.trim()));
  const options: ConnectionOptions = { servers: parsed.map((u) => u.host) };
  const first = parsed[0];
  if (first.username && first.password) {
    options.user = decodeURIComponent(first.username);
    options.pass = decodeURIComponent(first.password);
  } else if (first.username) {
    options.token = decodeURIComponent(first.username);
  }
  return options;
}

export function createChannelsMiddleware(): Middleware {
  const url = channelsNatsUrl();
  const common = {
    maxRetries: 5,
    maxInFlight: 16,
    deadLettering: { enabled: true, queueName: DEAD_LETTER_CHANNEL },
  };
  const adapter = url
    ? {
        type: "NATS",
        options: {
          ...common,
          nats: {
            connectionOptions: natsConnectionOptions(url),
            streamConfig: STREAM_CONFIG,
            consumerOptions: { config: { deliver_policy: "all" } },
          },
        },
      }
    : { type: "Fake", options: common };
  // The package's types are loose about adapter options.
  return ChannelsMiddleware({ adapter } as never) as unknown as Middleware;
}

function prefixed(namespace: string, channel: string): string {
  return namespace ? `${namespace}.${channel}` : channel;
}

/**
 * Creates the JetStream stream behind `channel` (and the dead-letter stream) if missing, so a
 * publisher can send before any consumer has subscribed. No-op without NATS.
 */
export async function ensureChannelStreams(namespace: string, channels: string[]): Promise<void> {
  const url = channelsNatsUrl();
  if (!url) return;
  const nc = await connect(natsConnectionOptions(url));
  try {
    const jsm = await nc.jetstreamManager();
    for (const channel of [...channels, DEAD_LETTER_CHANNEL]) {
      const subject = prefixed(namespace, channel);
      const name = subject.split(".").join("_");
      try {
        await jsm.streams.add({ name, subjects: [subject], ...STREAM_CONFIG });
      } catch (err) {
        if (!/already in use/.test((err as Error).message)) throw err;
      }
    }
  } finally {
    await nc.close();
  }
}

type ChannelBroker = ServiceBroker & {
  sendToChannel(channel: string, payload: unknown, opts?: Record<string, unknown>): Promise<void>;
};

/** Publishes `payload` on a durable channel (resolves once the server has stored it). */
export function sendToChannel(broker: ServiceBroker, channel: string, payload: unknown): Promise<void> {
  return (broker as ChannelBroker).sendToChannel(channel, payload);
}
