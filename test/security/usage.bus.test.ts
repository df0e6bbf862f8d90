/**
 * Forging usage over the bus, against nats-server with the platform's generated users and
 * permissions and the usage service in its own process: a credential may report only the resource
 * its role owns, on its own subject. A gpu-node (no usage to report) cannot publish on the usage
 * channel at all, nor anyone on another role's subject (NATS refuses); inference's credential
 * claiming GPU time on its own subject is consumed and refused by the ledger; its own tokens count.
 */
import { randomUUID } from "crypto";
import { NatsConnection, StringCodec } from "nats";
import { Client } from "pg";
import { gpuUsageKey, inferenceUsageKey, UsageRecord } from "../../lib/usage-protocol";
import { BusServer, rawBusClient, startBusServer } from "../support/bus-server";
import { ChildService, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

const namespace = uniqueName("ubus");
const sc = StringCodec();
const victim = randomUUID();
let server: BusServer;
let platform: NatsPlatform;
let usage: ChildService;
const clients: NatsConnection[] = [];

async function rawClient(user: string, nodeID: string): Promise<{ nc: NatsConnection; denied: string[] }> {
  const client = await rawBusClient(server, user, nodeID);
  clients.push(client.nc);
  return client;
}

const at = new Date().toISOString();
const gpuRecord = (): UsageRecord => ({
  key: gpuUsageKey(randomUUID(), 1),
  clientId: victim,
  resource: "gpu",
  name: "A100",
  start: new Date(Date.now() - 3600_000).toISOString(),
  end: at,
  quantity: 8,
});
const tokenRecord = (n: number): UsageRecord => ({
  key: inferenceUsageKey(randomUUID()),
  clientId: victim,
  resource: "inference",
  name: "llama3.2:1b",
  start: at,
  end: at,
  quantity: n,
});
const batch = (...records: UsageRecord[]) => sc.encode(JSON.stringify({ records }));

async function ledgerOf(clientId: string): Promise<Array<{ resource: string; amount: number }>> {
  const db = new Client({ connectionString: platform.databaseUrl });
  await db.connect();
  try {
    return (await db.query("SELECT resource, amount FROM usage.records WHERE client_id = $1 ORDER BY resource", [clientId])).rows;
  } finally {
    await db.end();
  }
}

beforeAll(async () => {
  server = await startBusServer({ namespace, gpuNodes: ["n1"] });
  platform = await startNatsPlatform({ namespace, transporter: server.url });
  usage = platform.spawn(["usage"], { TRANSPORTER: server.urlFor("usage") });
  const { nc } = await rawClient("usage", "usage.probe");
  const jsm = await nc.jetstreamManager();
  await platform.waitFor(async () => (await jsm.streams.info(`${namespace}_usage_records`).catch(() => undefined)) !== undefined, {
    timeoutMs: 40_000,
    message: "the usage stream",
  });
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((nc) => nc.close().catch(() => undefined)));
  await platform?.stop();
  await server?.stop();
});

describe("usage bus - who may report usage", () => {
  it("usage bus - a gpu-node credential cannot publish usage, on its own subject or the scheduler's", async () => {
    const { nc, denied } = await rawClient("gpu-node.n1", "gpu-node.n1");
    const js = nc.jetstream();
    for (const subject of [`${namespace}.usage.records.gpu-node.n1`, `${namespace}.usage.records.gpu-scheduler.x`]) {
      await expect(js.publish(subject, batch(gpuRecord()), { timeout: 2000 })).rejects.toThrow();
      await waitFor(() => denied.includes(`publish ${subject}`), { message: `the publish on ${subject} refused` });
    }
  });

  it("usage bus - inference's credential: GPU time claimed on its own subject is refused by the ledger, on the scheduler's by NATS; its tokens count", async () => {
    const { nc, denied } = await rawClient("inference", "inference.rogue");
    const js = nc.jetstream();
    const schedulerSubject = `${namespace}.usage.records.gpu-scheduler.x`;
    await expect(js.publish(schedulerSubject, batch(gpuRecord()), { timeout: 2000 })).rejects.toThrow();
    await waitFor(() => denied.includes(`publish ${schedulerSubject}`), { message: "the publish on the scheduler's subject refused" });
    const own = `${namespace}.usage.records.inference.rogue`;
    await js.publish(own, batch(gpuRecord())); // a GPU record alone
    await js.publish(own, batch(tokenRecord(5), gpuRecord())); // hidden behind a valid one: the whole batch is refused
    await js.publish(own, batch(tokenRecord(42))); // its own resource: counts
    await waitFor(async () => (await ledgerOf(victim)).length === 1, { message: "the tokens in the ledger" });
    await waitFor(() => usage.output().includes("gpu is not reported by inference"), { message: "usage to log the forged resource" });
    const { nc: ops } = await rawClient("usage", "usage.check");
    const jsm = await ops.jetstreamManager();
    await waitFor(async () => (await jsm.streams.info(`${namespace}_usage_records`)).state.messages === 0, { message: "every batch consumed" });
    expect(await ledgerOf(victim)).toEqual([{ resource: "inference", amount: 42 }]);
  });
});
