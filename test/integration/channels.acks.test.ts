/**
 * What a durable channel costs on the bus per message, on the local nats-server (JetStream): the
 * consumer acknowledges each message once, with no "in progress" acknowledgement before its handler
 * runs (lib/channels.ts, QuietProgressNats), and a failed handler's message is still redelivered.
 */
import { ServiceBroker } from "moleculer";
import { connect, NatsConnection, Subscription } from "nats";
import { natsConnectionOptions } from "../../lib/bus-connection";
import { createChannelsMiddleware, ensureChannelStreams } from "../../lib/channels";
import { parsePlatformSettings } from "../../lib/platform-settings";
import { NATS_URL, uniqueName, waitFor } from "../support/platform";

const CHANNEL = "acks-test";
let nc: NatsConnection;
let acks: Subscription;
const seen: string[] = [];
let broker: ServiceBroker;
const handled: number[] = [];
let failFirst = true;

beforeAll(async () => {
  nc = await connect(natsConnectionOptions(NATS_URL));
  acks = nc.subscribe("$JS.ACK.>");
  void (async () => {
    for await (const m of acks) if (m.subject.includes(CHANNEL)) seen.push(Buffer.from(m.data).toString());
  })();
  const settings = parsePlatformSettings({ TRANSPORTER: NATS_URL });
  broker = new ServiceBroker({ namespace: uniqueName("acks"), nodeID: "acks-test", logger: false, middlewares: [createChannelsMiddleware(settings)] });
  broker.createService({
    name: "consumer",
    channels: {
      [CHANNEL]: {
        group: "consumer",
        maxRetries: 3,
        async handler(payload: { n: number }) {
          if (payload.n === 99 && failFirst) {
            failFirst = false;
            throw new Error("first delivery fails");
          }
          handled.push(payload.n);
        },
      },
    },
  });
  await broker.start();
  await ensureChannelStreams(broker, []);
});

afterAll(async () => {
  await broker?.stop();
  const jsm = await nc.jetstreamManager();
  for (const stream of [`${broker.namespace}_${CHANNEL}`, `${broker.namespace}_dead-letter`]) await jsm.streams.delete(stream).catch(() => undefined);
  acks?.unsubscribe();
  await nc?.close();
});

describe("channels - acknowledgements on JetStream", () => {
  it("channels - each message handled is acknowledged once, with no in-progress ack before the handler", async () => {
    for (let n = 0; n < 5; n++) await broker.sendToChannel(CHANNEL, { n });
    await waitFor(() => handled.length === 5 && seen.length >= 5, { timeoutMs: 10_000, message: "5 messages handled and acknowledged" });
    expect(handled.sort()).toEqual([0, 1, 2, 3, 4]);
    // A flush makes sure no late acknowledgement is still on its way before counting.
    await nc.flush();
    expect(seen).toEqual(["+ACK", "+ACK", "+ACK", "+ACK", "+ACK"]);
  });

  it("channels - a message whose handler failed is delivered again and then handled", async () => {
    await broker.sendToChannel(CHANNEL, { n: 99 });
    await waitFor(() => handled.includes(99), { timeoutMs: 20_000, message: "the failed message redelivered and handled" });
    expect(failFirst).toBe(false);
  });
});
