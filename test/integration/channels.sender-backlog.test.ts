/**
 * The per-sender cap of the job-events stream on the local nats-server (JetStream): a node's real
 * burst is stored completely, past the cap the server refuses that node only (its publish queue retries),
 * and a stream made before the cap gets it, keeping what it holds.
 */
import { ServiceBroker } from "moleculer";
import { connect, JetStreamManager, NatsConnection, RetentionPolicy, StorageType } from "nats";
import { natsConnectionOptions } from "../../lib/bus-connection";
import { ensureChannelStreams } from "../../lib/channels";
import { JOB_EVENTS_CHANNEL, MAX_UNAPPLIED_EVENTS_PER_NODE } from "../../lib/gpu-protocol";
import { registerBrokerEnv } from "../../lib/settings";
import { NATS_URL, uniqueName } from "../support/platform";

const MAX = MAX_UNAPPLIED_EVENTS_PER_NODE;
const namespaces: string[] = [];
let nc: NatsConnection;
let jsm: JetStreamManager;

/** A broker of a fresh namespace on the local NATS (ensureChannelStreams reads only its settings). */
function brokerOfNewNamespace(): ServiceBroker {
  const namespace = uniqueName("backlog");
  namespaces.push(namespace);
  const broker = new ServiceBroker({ namespace, nodeID: "gpu-scheduler.test", logger: false });
  registerBrokerEnv(broker, { TRANSPORTER: NATS_URL });
  return broker;
}

const streamOf = (broker: ServiceBroker) => `${broker.namespace}_gpu_job-events`;
const subjectOf = (broker: ServiceBroker, node: string) => `${broker.namespace}.${JOB_EVENTS_CHANNEL}.gpu-node.${node}`;
const event = (i: number) => Buffer.from(JSON.stringify({ type: "started", n: i }));

async function perSubject(broker: ServiceBroker): Promise<Record<string, number>> {
  const info = await jsm.streams.info(streamOf(broker), { subjects_filter: ">" });
  return Object.fromEntries(Object.entries(info.state.subjects ?? {}).map(([subject, count]) => [subject.split(".").pop(), count]));
}

beforeAll(async () => {
  nc = await connect(natsConnectionOptions(NATS_URL));
  jsm = await nc.jetstreamManager();
});

afterAll(async () => {
  for (const namespace of namespaces)
    for (const stream of [`${namespace}_gpu_job-events`, `${namespace}_dead-letter`]) await jsm.streams.delete(stream).catch(() => undefined);
  await nc?.close();
});

describe("channels - per-node cap of the job-events stream", () => {
  it("channels - a node's burst (100 jobs ending at once) is stored completely; past the cap only that node is refused", async () => {
    const broker = brokerOfNewNamespace();
    await ensureChannelStreams(broker, [JOB_EVENTS_CHANNEL]);
    const js = nc.jetstream();
    const burst = await Promise.allSettled(Array.from({ length: 200 }, (_, i) => js.publish(subjectOf(broker, "a"), event(i))));
    expect(burst.filter((r) => r.status === "rejected")).toEqual([]);
    expect(await perSubject(broker)).toEqual({ a: 200 });

    for (let i = 200; i < MAX; i++) await js.publish(subjectOf(broker, "a"), event(i));
    await expect(js.publish(subjectOf(broker, "a"), event(MAX))).rejects.toThrow(/503|maximum messages per subject/);
    await js.publish(subjectOf(broker, "b"), event(0));
    expect(await perSubject(broker)).toEqual({ a: MAX, b: 1 });

    // Once the scheduler has taken one of a's events (a work queue drops it), a's retry is stored.
    await jsm.streams.deleteMessage(streamOf(broker), 1);
    await js.publish(subjectOf(broker, "a"), event(MAX));
    expect(await perSubject(broker)).toEqual({ a: MAX, b: 1 });
  });

  it("channels - a stream made before the cap gets it and keeps its messages", async () => {
    const broker = brokerOfNewNamespace();
    // As ensureChannelStreams made it before the cap.
    const subjects = [`${broker.namespace}.${JOB_EVENTS_CHANNEL}.>`];
    await jsm.streams.add({ name: streamOf(broker), subjects, storage: StorageType.File, retention: RetentionPolicy.Workqueue });
    await nc.jetstream().publish(subjectOf(broker, "a"), event(0));

    await ensureChannelStreams(broker, [JOB_EVENTS_CHANNEL]);
    const after = (await jsm.streams.info(streamOf(broker))).config;
    expect(after).toMatchObject({ max_msgs_per_subject: MAX, discard: "new", discard_new_per_subject: true, subjects });
    expect(await perSubject(broker)).toEqual({ a: 1 });
  });
});
