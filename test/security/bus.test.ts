/**
 * Attacks on the bus (issue 9 items 1-2, issue 19 crashes), replayed against Debian's nats-server
 * running the platform's own generated users and permissions, with the services in separate
 * processes. Rogues are brokers or raw NATS clients holding a real credential of the platform.
 */
import { connect, NatsConnection, StringCodec } from "nats";
import { ServiceBroker } from "moleculer";
import { natsConnectionOptions } from "../../lib/bus-connection";
import { BusTransporter } from "../../lib/nats-transporter";
import { BusServer, rawBusClient, startBusServer } from "../support/bus-server";
import { ChildService, http, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

const namespace = uniqueName("bus");
const P = `MOL-${namespace}`;
const sc = StringCodec();

let server: BusServer;
let platform: NatsPlatform;
let children: ChildService[] = [];
let base = "";
let victim: { token: string; apiKey: string; id: string };
const rogues: ServiceBroker[] = [];
const rawClients: NatsConnection[] = [];

/** Starts `services` in a process of the platform holding `user`'s credential. */
const spawnAs = (user: string, services: string[]) => platform.spawn(services, { TRANSPORTER: server.urlFor(user) });

/** A broker holding `user`'s credential, publishing as `nodeID`. */
async function rogueBroker(user: string, nodeID: string): Promise<ServiceBroker> {
  const transporter = new BusTransporter({ ...natsConnectionOptions(server.urlFor(user)), inboxPrefix: `_INBOX.${nodeID}`, senderBound: true });
  const broker = new ServiceBroker({ namespace, nodeID, transporter, logger: false, requestTimeout: 3000 });
  rogues.push(broker);
  await broker.start();
  return broker;
}

/** A raw NATS client for `user` that records what the server refused it. */
async function rawClient(user: string, nodeID: string): Promise<{ nc: NatsConnection; denied: string[] }> {
  const client = await rawBusClient(server, user, nodeID);
  rawClients.push(client.nc);
  return client;
}

const packet = (sender: string, extra: Record<string, unknown>) => sc.encode(JSON.stringify({ ver: "4", sender, ...extra }));

async function register(prefix: string) {
  const email = `${uniqueName(prefix)}@example.com`;
  const reg = await http(base, "POST", "/api/auth/register", { body: { email, name: "Victim", password: "password-123" } });
  expect(reg.status).toBe(201);
  const key = await http(base, "POST", "/api/auth/api-keys", { token: reg.body.accessToken });
  expect(key.status).toBe(201);
  return { token: reg.body.accessToken as string, apiKey: key.body.apiKey as string, id: reg.body.client.id as string };
}

const keyStillWorks = async (apiKey: string) => (await http(base, "GET", "/api/auth/me", { headers: { "x-api-key": apiKey } })).status === 200;
const alive = (c: ChildService) => c.proc.exitCode === null && c.proc.signalCode === null;

beforeAll(async () => {
  server = await startBusServer({ namespace, gpuNodes: ["n1", "n2"] });
  platform = await startNatsPlatform({
    namespace,
    transporter: server.url,
    env: {
      JWT_SECRET: "bus-test-secret",
      GPU_EXECUTOR: "process",
      GPU_UNSAFE_UNISOLATED_JOBS: "true",
      GPU_HEARTBEAT_S: "1",
      GPU_SIMULATE: "NVIDIA GeForce RTX 3060:12288",
    },
  });
  children = platform.children;
  base = platform.baseUrl;
  const answers = (path: string, status: number) =>
    platform.waitFor(
      async () => {
        const res = await http(base, "POST", path, { body: { email: "probe@example.com", password: "probe-password" } }).catch(() => undefined);
        return res?.status === status;
      },
      { timeoutMs: 40_000, message: `${path} over the authenticated bus` },
    );
  // auth first: services creating their schemas in one fresh database at once can collide.
  spawnAs("api-gateway", ["api-gateway"]);
  spawnAs("auth", ["auth"]);
  await answers("/api/auth/login", 401);
  victim = await register("victim");
  spawnAs("gpu-scheduler", ["gpu-scheduler"]);
  spawnAs("gpu-node.n1", ["gpu-node"]);
  await platform.waitFor(
    async () => {
      const res = await http(base, "GET", "/api/gpu/status", { token: victim.token });
      return res.status === 200 && JSON.stringify(res.body).includes("RTX 3060");
    },
    { timeoutMs: 40_000, message: "the scheduler to see gpu-node n1" },
  );
}, 90_000);

afterAll(async () => {
  await Promise.all(rogues.map((b) => b.stop().catch(() => undefined)));
  await Promise.all(rawClients.map((nc) => nc.close().catch(() => undefined)));
  await platform?.stop();
  await server?.stop();
});

describe("bus - who may connect", () => {
  it("bus - a client without credentials cannot connect", async () => {
    await expect(connect({ servers: `127.0.0.1:${server.port}`, reconnect: false })).rejects.toMatchObject({ code: "AUTHORIZATION_VIOLATION" });
  });

  it("bus - a wrong password is refused", async () => {
    await expect(connect({ servers: `127.0.0.1:${server.port}`, user: "auth", pass: "not-the-password", reconnect: false })).rejects.toMatchObject({
      code: "AUTHORIZATION_VIOLATION",
    });
  });

  it("bus - the platform itself works over the authenticated bus (register, API key, me)", async () => {
    const someone = await register("legit");
    expect(await keyStillWorks(someone.apiKey)).toBe(true);
  });
});

describe("bus - a gpu-node credential (the least trusted)", () => {
  it("bus - a gpu-node credential cannot call auth.createApiKey", async () => {
    const rogue = await rogueBroker("gpu-node.n2", "gpu-node.n2");
    await waitFor(() => rogue.registry.actions.isAvailable("auth.createApiKey"), { message: "the rogue to see auth" });
    const forged = { caller: { clientId: victim.id, role: "client", via: "jwt" } };
    await expect(rogue.call("auth.createApiKey", {}, { meta: forged })).rejects.toThrow();
    // createApiKey replaces the account's key: the old one still working proves it never ran.
    expect(await keyStillWorks(victim.apiKey)).toBe(true);
  });

  it("bus - a gpu-node credential cannot publish calls to dbaas.destroy, gpu-scheduler actions or another node's gpu-node.run", async () => {
    const { nc, denied } = await rawClient("gpu-node.n2", "gpu-node.n2");
    const subjects = [
      `${P}.REQB.dbaas.destroy.gpu-node.n2`,
      `${P}.REQB.gpu-scheduler.create.gpu-node.n2`,
      `${P}.REQB.gpu-scheduler.cancel.gpu-node.n2`,
      `${P}.REQB.gpu-node.run.gpu-node.n2`,
      `${P}.REQ.gpu-node.n1.gpu-node.n2`,
      `${P}.REQB.auth.resolveApiKey.gpu-node.n2`,
    ];
    for (const subject of subjects)
      nc.publish(subject, packet("gpu-node.n2", { id: "x", action: "gpu-node.run", params: { jobId: "j", gpuUuid: "g", command: "id" } }));
    await nc.flush();
    await waitFor(() => subjects.every((s) => denied.includes(`publish ${s}`)), { message: `every publish refused (refused: ${denied.join(", ")})` });
  });

  it("bus - a gpu-node credential cannot publish as another node (another sender id)", async () => {
    const { nc, denied } = await rawClient("gpu-node.n2", "gpu-node.n2");
    const subject = `${P}.INFO.gpu-node.n1`;
    nc.publish(subject, packet("gpu-node.n1", { services: [] }));
    await nc.flush();
    await waitFor(() => denied.includes(`publish ${subject}`), { message: "the publish under n1's id to be refused" });
  });

  it("bus - a heartbeat claiming another node's id is ignored by the scheduler", async () => {
    const { nc } = await rawClient("gpu-node.n2", "gpu-node.n2");
    const fake = {
      nodeId: "gpu-node.n1",
      cards: [{ uuid: "GPU-fake-h100", index: 0, name: "NVIDIA H100", memoryTotal: 81920, memoryUsed: 0, utilization: 0, temperature: 30 }],
      runningJobIds: [],
      executor: "process",
      at: new Date().toISOString(),
    };
    // Broadcast events go to each listening node: find the scheduler's id from the gateway's view.
    const rogue = await rogueBroker("gpu-node.n2", "gpu-node.n2");
    await waitFor(() => rogue.registry.getServiceList({ onlyAvailable: true }).some((s: { name: string }) => s.name === "gpu-scheduler"), {
      message: "the scheduler to be known",
    });
    const schedulerNode = rogue.registry.getServiceList({ onlyAvailable: true }).find((s: { name: string }) => s.name === "gpu-scheduler")!.nodeID as string;
    const event = { id: "e1", event: "gpu-node.heartbeat", data: fake, groups: ["gpu-scheduler"], broadcast: true, meta: {}, level: 1, needAck: false };
    // Under its own id (allowed), claiming n1 in the payload; and claiming n1 as sender (dropped by the transporter).
    nc.publish(`${P}.EVENT.${schedulerNode}.gpu-node.heartbeat.gpu-node.n2`, packet("gpu-node.n2", event));
    nc.publish(`${P}.EVENT.${schedulerNode}.gpu-node.heartbeat.gpu-node.n2`, packet("gpu-node.n1", event));
    await nc.flush();
    const scheduler = children[2];
    await waitFor(() => scheduler.output().includes("Ignored a heartbeat for gpu-node.n1 sent by gpu-node.n2"), {
      message: "the scheduler to refuse the heartbeat",
    });
    await waitFor(() => scheduler.output().includes('sender "gpu-node.n1" published under "gpu-node.n2"'), {
      message: "the transporter to drop the forged sender",
    });
    // The scheduler keeps the cluster in memory: its status never lists the fake card.
    const status = await http(base, "GET", "/api/gpu/status", { token: victim.token });
    expect(status.status).toBe(200);
    expect(JSON.stringify(status.body)).toContain("RTX 3060");
    expect(JSON.stringify(status.body)).not.toContain("H100");
  });

  it("bus - a gpu-node credential cannot read auth traffic (a snooper sees no login or API key)", async () => {
    const { nc, denied } = await rawClient("gpu-node.n2", "gpu-node.n2");
    const seen: string[] = [];
    for (const subject of [">", `${P}.REQB.auth.>`, `${P}.REQ.auth.>`, `${P}.RES.api-gateway.>`, "_INBOX.>"])
      nc.subscribe(subject, { callback: (_err, msg) => msg && seen.push(msg.subject) });
    await nc.flush();
    await waitFor(() => denied.filter((d) => d.startsWith("subscription")).length === 5, { message: `every subscription refused (${denied.join(", ")})` });
    const password = `snoop-${uniqueName("pw")}`;
    const email = `${uniqueName("snooped")}@example.com`;
    expect((await http(base, "POST", "/api/auth/register", { body: { email, name: "S", password } })).status).toBe(201);
    await nc.flush();
    expect(seen).toEqual([]);
  });

  it("bus - job events for another node's job, or on another node's subject, change nothing", async () => {
    const job = await http(base, "POST", "/api/gpu/jobs", { token: victim.token, body: { command: "sleep 30" } });
    expect(job.status).toBe(201);
    const running = await waitFor(
      async () => {
        const res = await http(base, "GET", `/api/gpu/jobs/${job.body.id}`, { token: victim.token });
        return res.body.status === "running" ? res.body : false;
      },
      { timeoutMs: 20_000, message: "the job to run on n1" },
    );
    const { nc, denied } = await rawClient("gpu-node.n2", "gpu-node.n2");
    const js = nc.jetstream();
    const forged = {
      type: "finished",
      jobId: job.body.id,
      nodeId: "gpu-node.n1",
      gpuUuid: running.gpuUuid ?? "GPU-x",
      exitCode: 0,
      output: "attacker output",
      at: new Date().toISOString(),
    };
    // On n1's subject: not this credential's to publish.
    await expect(js.publish(`${namespace}.gpu.job-events.gpu-node.n1`, sc.encode(JSON.stringify(forged)), { timeout: 2000 })).rejects.toThrow();
    await waitFor(() => denied.includes(`publish ${namespace}.gpu.job-events.gpu-node.n1`), { message: "the publish on n1's subject to be refused" });
    // On its own subject, claiming n1; and claiming itself for a job that is not on it.
    await js.publish(`${namespace}.gpu.job-events.gpu-node.n2`, sc.encode(JSON.stringify(forged)));
    await js.publish(`${namespace}.gpu.job-events.gpu-node.n2`, sc.encode(JSON.stringify({ ...forged, nodeId: "gpu-node.n2" })));
    // The scheduler consumed both (the work-queue stream is empty again) and logged why it dropped them.
    const { nc: ops } = await rawClient("gpu-scheduler", "gpu-scheduler.test");
    const jsm = await ops.jetstreamManager();
    const streamName = `${namespace}_gpu_job-events`;
    await waitFor(async () => (await jsm.streams.info(streamName)).state.messages === 0, { message: "the forged events to be consumed" });
    const scheduler = children[2];
    await waitFor(() => scheduler.output().includes(`Dropped a job event for gpu-node.n1 (job ${job.body.id}) published by gpu-node.n2`), {
      message: "the scheduler to log the forged sender",
    });
    await waitFor(() => scheduler.output().includes(`Ignored job event finished of ${job.body.id} from gpu-node.n2`), {
      message: "the scheduler to log the event for a job not on the node",
    });
    const after = await http(base, "GET", `/api/gpu/jobs/${job.body.id}`, { token: victim.token });
    expect(after.body.status).toBe("running");
    expect(JSON.stringify(after.body)).not.toContain("attacker output");
    await http(base, "POST", `/api/gpu/jobs/${job.body.id}/cancel`, { token: victim.token });
  });
});

describe("bus - core credentials", () => {
  it("bus - a rogue with the inference credential cannot get auth to act for an account", async () => {
    const rogue = await rogueBroker("inference", "inference.rogue");
    await waitFor(() => rogue.registry.actions.isAvailable("auth.createApiKey"), { message: "the rogue to see auth" });
    const forged = { caller: { clientId: victim.id, role: "client", via: "jwt" } };
    await expect(rogue.call("auth.createApiKey", {}, { meta: forged })).rejects.toThrow();
    await expect(rogue.call("auth.resolveApiKey", { key: victim.apiKey })).rejects.toThrow();
    expect(await keyStillWorks(victim.apiKey)).toBe(true);
  });

  it("bus - an INFO forged with the gateway's node id (valid gateway credential) stops nothing", async () => {
    const gatewayNode = await waitFor(async () => {
      const b = await rogueBroker("api-gateway", "api-gateway.rogue");
      const found = b.registry.getServiceList({ onlyAvailable: true }).find((s: { name: string }) => s.name === "api-gateway");
      return found?.nodeID as string | undefined;
    });
    const { nc } = await rawClient("api-gateway", "api-gateway.rogue2");
    nc.publish(
      `${P}.INFO.${gatewayNode}`,
      packet(gatewayNode, { services: [], instanceID: "forged", config: {}, client: {}, ipList: [], hostname: "x", seq: 99 }),
    );
    nc.publish(`${P}.INFO.${gatewayNode}`, sc.encode("not json at all"));
    nc.publish(`${P}.HEARTBEAT.${gatewayNode}`, packet(gatewayNode, { cpu: "x" }));
    await nc.flush();
    // Still serving, several times over the next moments.
    for (let i = 0; i < 3; i++)
      expect((await http(base, "POST", "/api/auth/login", { body: { email: "p@example.com", password: "password-123" } })).status).toBe(401);
    expect(children.every(alive)).toBe(true);
  });

  it("bus - an oversized request is a clean error and the sender stays up", async () => {
    const rogue = await rogueBroker("api-gateway", "api-gateway.big");
    await waitFor(() => rogue.registry.actions.isAvailable("auth.login"), { message: "auth" });
    const email = `${"\uFFFD".repeat(400_000)}@example.com`; // ~1.2 MB of JSON, over the 1 MB max_payload
    await expect(rogue.call("auth.login", { email, password: "x" })).rejects.toMatchObject({ code: 413, type: "PAYLOAD_TOO_LARGE" });
    await expect(rogue.call("auth.login", { email: "small@example.com", password: "password-123" })).rejects.toMatchObject({ code: 401 });
  });
});

describe("bus - TLS", () => {
  let tlsServer: BusServer;
  let tls: NatsPlatform | undefined;
  afterAll(async () => {
    await tls?.stop();
    await tlsServer?.stop();
  });

  it("bus - services talk over tls:// with the platform's CA; a client not trusting it is refused", async () => {
    const tlsNamespace = uniqueName("bustls");
    tlsServer = await startBusServer({ namespace: tlsNamespace, tls: true });
    const ca = tlsServer.certificates!.caFile;
    tls = await startNatsPlatform({ namespace: tlsNamespace, transporter: tlsServer.url, env: { NATS_TLS_CA: ca, JWT_SECRET: "bus-tls-secret" } });
    tls.spawn(["api-gateway"], { TRANSPORTER: tlsServer.urlFor("api-gateway") });
    tls.spawn(["auth"], { TRANSPORTER: tlsServer.urlFor("auth") });
    const tlsBase = tls.baseUrl;
    await tls.waitFor(
      async () => {
        const res = await http(tlsBase, "POST", "/api/auth/register", {
          body: { email: `${uniqueName("tls")}@example.com`, name: "T", password: "password-123" },
        }).catch(() => undefined);
        return res?.status === 201;
      },
      { timeoutMs: 40_000, message: "register over the TLS bus" },
    );
    // The server speaks only TLS, and a client that does not trust the platform's CA gets no connection.
    const options = natsConnectionOptions(tlsServer.urlFor("auth"));
    await expect(connect({ ...options, reconnect: false })).rejects.toThrow();
    const trusted = await connect({ ...natsConnectionOptions(tlsServer.urlFor("auth"), { caFile: ca }), reconnect: false });
    expect(trusted.info?.tls_required).toBe(true);
    await trusted.close();
  });
});
