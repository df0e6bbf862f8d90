/**
 * The direct serve channel (issue 29; services/gpu-node/serve-direct.ts): inference asks the node
 * for a ticket over real NATS (`gpu-node.serveTicket`) and then speaks to the replica over one TLS
 * connection to the node. OpenAI-compatible servers on two jobs' serve sockets stand in for the
 * jobs' forwarders and replicas. A whole answer and a stream chunk by chunk, connections kept alive,
 * a client leaving closing the replica's; a node without the channel still reached over the bus.
 * Abuse: a reused, expired, unknown or other job's ticket, another key, bytes that are not TLS, a silent or flooding client, an address
 * that is not a node, a replica gone: nothing reaches a replica it was not issued for.
 */
import { mkdirSync, mkdtempSync, rmSync } from "fs";
import http from "http";
import net from "net";
import os from "os";
import path from "path";
import type { TLSSocket } from "tls";
import { ServiceBroker } from "moleculer";
import type { Readable } from "stream";
import { SERVE_TICKET_ACTION, type ServeMeta, type ServeTicket } from "../../lib/deployment-protocol";
import { DirectServe } from "../../services/gpu-node/serve-direct";
import { serveAnswer, serveSocketPath, serveDir } from "../../services/gpu-node/serve-relay";
import { OpenAiProvider } from "../../services/inference/providers/openai";
import { connectDirect, getFrom, ReplicaAgent, serveCall } from "../../services/inference/deployments/tunnel";
import { NATS_URL, uniqueName, waitFor } from "../support/platform";
import { replicaStub } from "../support/replica-stub";

const JOBS = ["job-a", "job-b"];

/** Connects to `address`, sends `data`, and resolves with everything received until the node closes the connection. */
function exchange(address: string, data: string | null, timeoutMs = 5000): Promise<string> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port }, () => data !== null && socket.write(data));
    let got = "";
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`still open after ${timeoutMs} ms; got ${JSON.stringify(got)}`))), timeoutMs);
    socket.on("data", (c) => (got += c.toString("latin1")));
    socket.on("error", () => undefined);
    socket.once("close", () => (clearTimeout(timer), resolve(got)));
  });
}

describe("gpu-node serve direct - the replica over one TCP connection, tickets from the bus", () => {
  const relayDir = mkdtempSync(path.join(os.tmpdir(), "serve-direct-"));
  const namespace = uniqueName("direct");
  const node = new ServiceBroker({ namespace, nodeID: uniqueName("node"), transporter: NATS_URL, logger: false });
  const busOnlyNode = new ServiceBroker({ namespace, nodeID: uniqueName("node-bus"), transporter: NATS_URL, logger: false });
  const inference = new ServiceBroker({ namespace, nodeID: uniqueName("inf"), transporter: NATS_URL, logger: false });
  /** How far the channel's clock is ahead of the real one (a ticket lapses without waiting for it). */
  let clockAhead = 0;
  const direct = new DirectServe({
    relayDir,
    host: "127.0.0.1",
    port: 0,
    ticketTtlMs: 500,
    handshakeMs: 300,
    maxHandshakes: 4,
    now: () => Date.now() + clockAhead,
  });
  /** The `serve` calls each node got (the bus path). */
  const busCalls: string[] = [];
  const servers: http.Server[] = [];
  /** Connections each job's server accepted, and streams closed before their end. */
  const opened: Record<string, number> = { "job-a": 0, "job-b": 0 };
  let closedStreams = 0;

  beforeAll(async () => {
    for (const job of JOBS) {
      mkdirSync(serveDir(relayDir, job), { recursive: true });
      const server = replicaStub(`${job} `, (finished) => finished || (closedStreams += 1));
      server.on("connection", () => (opened[job] += 1));
      await new Promise<void>((resolve) => server.listen(serveSocketPath(relayDir, job), resolve));
      servers.push(server);
    }
    await direct.listen();
    const serve = (name: string) => (ctx: { params: Readable; meta: ServeMeta }) => {
      busCalls.push(name);
      return serveAnswer(relayDir, ctx.meta.jobId, ctx.params);
    };
    node.createService({
      name: "gpu-node",
      actions: {
        serve: serve("direct"),
        serveTicket: (ctx: { params: { jobId: string } }) => direct.ticket(ctx.params.jobId),
      },
    });
    // A node with the action and no channel (GPU_SERVE_LISTEN unset) answers null.
    busOnlyNode.createService({ name: "gpu-node", actions: { serve: serve("bus-only"), serveTicket: () => null } });
    await Promise.all([node.start(), busOnlyNode.start(), inference.start()]);
    await waitFor(() => inference.registry.actions.get(SERVE_TICKET_ACTION)?.endpoints.length === 2, { timeoutMs: 10_000, message: "two nodes' serveTicket" });
  });

  afterAll(async () => {
    await direct.close();
    await Promise.all([node.stop(), busOnlyNode.stop(), inference.stop()]);
    for (const s of servers) s.close();
    rmSync(relayDir, { recursive: true, force: true });
  });

  const agentOf = (job = "job-a", nodeId = node.nodeID) => new ReplicaAgent(serveCall(inference, nodeId, job, 10_000), undefined, 2000);
  const provider = (agent: ReplicaAgent) => new OpenAiProvider("deployment", "http://replica/v1", undefined, agent);
  const hi = (maxTokens?: number) => ({ model: "tiny", maxTokens, messages: [{ role: "user" as const, content: "hi" }] });
  const whole = async (agent: ReplicaAgent) => (await provider(agent).complete(hi(), new AbortController().signal)).text;
  const ticketFor = (jobId: string): Promise<ServeTicket> => inference.call(SERVE_TICKET_ACTION, { jobId }, { nodeID: node.nodeID });

  test("serve direct - a whole answer and a stream chunk by chunk over the direct channel, kept alive, no bus tunnel", async () => {
    const agent = agentOf();
    busCalls.length = 0;
    const before = opened["job-a"];
    for (let i = 0; i < 3; i++) expect(await whole(agent)).toBe("job-a to tiny");
    const arrived: number[] = [];
    let text = "";
    for await (const chunk of await provider(agent).stream(hi(), new AbortController().signal))
      if (chunk.type === "delta") {
        text += chunk.text;
        arrived.push(Date.now());
      }
    expect(text).toBe("w0 w1 w2 w3 w4 ");
    expect(arrived[4] - arrived[0]).toBeGreaterThan(250);
    expect([agent.direct, busCalls, opened["job-a"] - before]).toEqual([true, [], 1]);
    expect(agent.inflight).toBe(0);
    agent.destroy();
  });

  test("serve direct - a client that goes away closes the replica's connection; 30 at once all answered", async () => {
    const agent = agentOf();
    const before = closedStreams;
    const control = new AbortController();
    const chunks = (await provider(agent).stream(hi(100), control.signal))[Symbol.asyncIterator]();
    await chunks.next();
    control.abort();
    await expect(chunks.next()).rejects.toBeDefined();
    await waitFor(() => closedStreams > before, { timeoutMs: 2000, message: "the replica's connection closed" });
    const answers = await Promise.all(Array.from({ length: 30 }, () => whole(agent)));
    expect(answers).toEqual(Array(30).fill("job-a to tiny"));
    await waitFor(() => agent.inflight === 0, { timeoutMs: 2000, message: "none in flight" });
    agent.destroy();
  });

  test("serve direct - a node without the channel is reached over the bus", async () => {
    const agent = agentOf("job-a", busOnlyNode.nodeID);
    busCalls.length = 0;
    expect(await whole(agent)).toBe("job-a to tiny");
    expect(await whole(agent)).toBe("job-a to tiny");
    expect([agent.direct, busCalls]).toEqual([false, ["bus-only"]]);
    agent.destroy();
  });

  test("serve direct - a ticket reaches its own job once: another job's, a reused, a wrong-key, an unknown or an expired ticket gets nothing", async () => {
    const get = (ticket: ServeTicket) => connectDirect(ticket, 2000).then((socket) => getFrom(new OneSocketAgent(socket), "/x", 2000));
    const refused = (ticket: ServeTicket) => expect(connectDirect(ticket, 2000)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    // Each job's ticket reaches that job's server.
    const b = await ticketFor("job-b");
    const beforeA = opened["job-a"];
    await get(b);
    expect([opened["job-b"] > 0, opened["job-a"]]).toEqual([true, beforeA]);
    // Used once: the same ticket again fails its handshake (ECONNREFUSED: nothing of a request went
    // out, the router tries another replica), and nothing reaches a server.
    const before = { ...opened };
    await refused(b);
    // The right identity with another key (what someone who saw the identity on the wire would try),
    // and an identity never issued.
    const c = await ticketFor("job-b");
    await refused({ ...c, key: Buffer.alloc(32, 7).toString("base64") });
    await refused({ ...c, ticket: "0".repeat(32) });
    // Lapsed (TTL 500 ms here: the channel's clock moves on past it).
    const old = await ticketFor("job-a");
    clockAhead += 600;
    await refused(old);
    // Bytes that are not TLS at all.
    expect(await exchange(b.address, `${b.ticket}\nGET / HTTP/1.1\r\n\r\n`)).not.toContain("HTTP/1.1");
    expect(opened).toEqual(before);
  });

  test("serve direct - a ticket for a job with no replica here is refused; an expired flood of tickets stays bounded", async () => {
    const none = await ticketFor("job-gone");
    await expect(connectDirect(none, 2000)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    // A job id that is not one (a path out of the relay folder) reaches nothing, even with a ticket issued for it.
    await expect(connectDirect(direct.ticket("../job-a/.."), 2000)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    for (let i = 0; i < 50; i++) await ticketFor("job-a");
    clockAhead += 600;
    await ticketFor("job-a");
    expect(direct.outstandingTickets).toBe(1);
  });

  test("serve direct - a client that says nothing is closed after the handshake time; past the limit of waiting ones, at once, and requests go over the bus meanwhile", async () => {
    const { address } = await ticketFor("job-a");
    const closedAt = (got: string) => ({ got, at: Date.now() });
    const started = Date.now();
    const silent = Array.from({ length: 4 }, () => exchange(address, null, 3000).then(closedAt));
    await waitFor(() => direct.waitingHandshakes === 4, { timeoutMs: 2000, message: "four waiting" });
    // A fifth while four wait: closed at once, before any of them (their handshake time is 300 ms here).
    const fifth = closedAt(await exchange(address, null, 3000));
    const four = await Promise.all(silent);
    expect([fifth.got, ...four.map((s) => s.got)]).toEqual(["", "", "", "", ""]);
    expect(four.every((s) => s.at > fifth.at && s.at - started >= 280)).toBe(true);
    expect(direct.waitingHandshakes).toBe(0);
    // While the channel's handshake slots are all taken, a request still gets through: over the bus.
    busCalls.length = 0;
    const holders = Array.from({ length: 4 }, () => exchange(address, null, 3000));
    await waitFor(() => direct.waitingHandshakes === 4, { timeoutMs: 2000, message: "four waiting again" });
    const busy = agentOf();
    expect([await whole(busy), busCalls]).toEqual(["job-a to tiny", ["direct"]]);
    busy.destroy();
    await Promise.all(holders);
    // Then a good ticket still works.
    const agent = agentOf();
    expect(await whole(agent)).toBe("job-a to tiny");
    agent.destroy();
  });

  test("serve direct - a large answer from a replica that closes, to a slow reader that half-closed after its request: every byte arrives", async () => {
    const SIZE = 8 * 1024 * 1024;
    const head = `HTTP/1.1 200 OK\r\ncontent-length: ${SIZE}\r\nconnection: close\r\n\r\n`;
    let replicaClosed = false;
    mkdirSync(serveDir(relayDir, "job-big"), { recursive: true });
    const big = net.createServer((socket) => {
      socket.once("close", () => (replicaClosed = true));
      socket.once("data", () => socket.end(Buffer.concat([Buffer.from(head), Buffer.alloc(SIZE, 97)])));
    });
    await new Promise<void>((resolve) => big.listen(serveSocketPath(relayDir, "job-big"), resolve));
    try {
      const socket = await connectDirect(await ticketFor("job-big"), 2000);
      // The request, then this side's end (a half-close: the answer is still read).
      socket.end("GET / HTTP/1.1\r\nhost: replica\r\n\r\n");
      // A slow reader: the replica is done and gone long before it has read everything.
      let bytes = 0;
      let closedWhileReading = false;
      socket.on("data", (c: Buffer) => {
        bytes += c.length;
        closedWhileReading ||= replicaClosed;
        socket.pause();
        setTimeout(() => socket.resume(), 2);
      });
      await new Promise((resolve) => socket.once("close", resolve));
      expect([closedWhileReading, bytes]).toEqual([true, head.length + SIZE]);
    } finally {
      big.close();
    }
  });

  test("serve direct - an address that is not a node gets a TLS hello and never a request", async () => {
    const received: Buffer[] = [];
    const impostor = net.createServer((socket) => {
      socket.on("data", (c) => received.push(c));
      socket.write("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    });
    await new Promise<void>((resolve) => impostor.listen(0, "127.0.0.1", resolve));
    const { port } = impostor.address() as net.AddressInfo;
    const ticket = { address: `127.0.0.1:${port}`, ticket: "1".repeat(32), key: Buffer.alloc(32, 1).toString("base64") };
    await expect(connectDirect(ticket, 2000)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    await new Promise((resolve) => impostor.close(resolve));
    // A TLS handshake record (the key itself never travels), and nothing after it.
    const bytes = Buffer.concat(received);
    expect([bytes[0], bytes.includes(Buffer.from(ticket.key, "base64")), bytes.toString("latin1").includes("HTTP")]).toEqual([0x16, false, false]);
  });
});

/** An agent handing out one given socket (a connection made by connectDirect). */
class OneSocketAgent extends http.Agent {
  constructor(private readonly socket: net.Socket | TLSSocket) {
    super({ keepAlive: false });
  }
  override createConnection(): net.Socket | TLSSocket {
    return this.socket;
  }
}
