/**
 * The tunnel to a deployment's replica across processes' bus (issue 29): the inference side's
 * agent (deployments/tunnel.ts) and the node's serve relay (gpu-node serve-relay.ts) on two brokers
 * over real NATS, with an OpenAI-compatible server on the serve socket standing in for the job's
 * forwarder and replica. A whole answer, a stream arriving chunk by chunk, and a client that stops
 * reading closing the server's connection; connections kept alive across requests, under 50 at
 * once (whole, streamed, cancelled), and never reused once the server closed them. The bytes travel
 * as latin1 strings to a node that says it speaks that wire, as Buffers to one that does not; a
 * node answering anything but bytes fails the request at once.
 */
import { mkdirSync, mkdtempSync, rmSync } from "fs";
import http from "http";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import { Readable } from "stream";
import { MAX_WIRE_CHUNK, SERVE_ACTION, SERVE_WIRE, type ServeMeta } from "../../lib/deployment-protocol";
import { SERVE_SOCKET, serveAnswer, serveDir } from "../../services/gpu-node/serve-relay";
import { OpenAiProvider } from "../../services/inference/providers/openai";
import { ReplicaAgent, serveCall } from "../../services/inference/deployments/tunnel";
import { NATS_URL, uniqueName, waitFor } from "../support/platform";
import { replicaStub } from "../support/replica-stub";

const JOB = "job-1";

describe("inference deployments - the tunnel to a replica over NATS", () => {
  const relayDir = mkdtempSync(path.join(os.tmpdir(), "tunnel-"));
  const namespace = uniqueName("tunnel");
  const node = new ServiceBroker({ namespace, nodeID: uniqueName("node"), transporter: NATS_URL, logger: false });
  const inference = new ServiceBroker({ namespace, nodeID: uniqueName("inf"), transporter: NATS_URL, logger: false });
  // A node that speaks the latin1 wire (as gpu-node.service.ts says), and one that answers what is not bytes.
  const latin1Node = new ServiceBroker({ namespace, nodeID: uniqueName("node-latin1"), transporter: NATS_URL, logger: false });
  const hostileNode = new ServiceBroker({ namespace, nodeID: uniqueName("node-hostile"), transporter: NATS_URL, logger: false });
  /** What each node was asked: the wire in meta, and whether the request stream was in object mode. */
  const asked: Array<{ node: string; wire?: string; objectMode: boolean }> = [];
  let server: http.Server;
  let closedStreams = 0;
  /** The server's connections: opened in all, and open now. */
  let opened = 0;
  const open = new Set<import("net").Socket>();

  beforeAll(async () => {
    mkdirSync(serveDir(relayDir, JOB), { recursive: true });
    server = replicaStub("", () => (closedStreams += 1));
    server.on("connection", (socket) => {
      opened += 1;
      open.add(socket);
      socket.once("close", () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(path.join(serveDir(relayDir, JOB), SERVE_SOCKET), resolve));
    const serve = (name: string, wire?: string) => ({
      name: "gpu-node",
      actions: {
        serve: {
          ...(wire ? { wire } : {}),
          handler: (ctx: { params: Readable; meta: ServeMeta }) => {
            asked.push({ node: name, wire: ctx.meta.wire, objectMode: ctx.params.readableObjectMode });
            return serveAnswer(relayDir, ctx.meta.jobId, ctx.params, ctx.meta.wire);
          },
        },
      },
    });
    node.createService(serve("buffer"));
    latin1Node.createService(serve("latin1", SERVE_WIRE));
    hostileNode.createService({
      name: "gpu-node",
      actions: {
        serve: {
          wire: SERVE_WIRE,
          handler: (ctx: { params: Readable; meta: { jobId: string } }) => {
            ctx.params.on("error", () => undefined).resume();
            // An answer that is not bytes (an object), or a string over the wire's chunk limit.
            const chunk = ctx.meta.jobId === "object" ? { not: "bytes" } : "x".repeat(MAX_WIRE_CHUNK + 1);
            return Readable.from([chunk, "HTTP/1.1 200 OK\r\n"], { objectMode: true });
          },
        },
      },
    });
    await Promise.all([node.start(), latin1Node.start(), hostileNode.start(), inference.start()]);
    await waitFor(() => inference.registry.actions.get(SERVE_ACTION)?.endpoints.length === 3, { timeoutMs: 10_000, message: "three nodes' serve" });
  });

  afterAll(async () => {
    await Promise.all([node.stop(), latin1Node.stop(), hostileNode.stop(), inference.stop()]);
    server.close();
    rmSync(relayDir, { recursive: true, force: true });
  });

  const agentOf = (idleMs?: number) => new ReplicaAgent(serveCall(inference, node.nodeID, JOB, 10_000), idleMs);
  const provider = (agent = agentOf()) => new OpenAiProvider("deployment", "http://replica/v1", undefined, agent);
  const hi = (maxTokens?: number) => ({ model: "tiny", maxTokens, messages: [{ role: "user" as const, content: "hi" }] });
  const whole = async (p: OpenAiProvider) => (await p.complete(hi(), new AbortController().signal)).text;
  const streamed = async (p: OpenAiProvider, maxTokens = 2) => {
    let text = "";
    for await (const chunk of await p.stream(hi(maxTokens), new AbortController().signal)) if (chunk.type === "delta") text += chunk.text;
    return text;
  };
  /** A stream the client leaves after its first chunk: rejected, the server's side closed. */
  const cancelled = async (p: OpenAiProvider) => {
    const control = new AbortController();
    const chunks = (await p.stream(hi(100), control.signal))[Symbol.asyncIterator]();
    await chunks.next();
    control.abort();
    return chunks.next().then(
      () => "not cancelled",
      () => "cancelled",
    );
  };

  test("inference deployments - a whole answer and a stream pass through the node, the stream chunk by chunk", async () => {
    expect(SERVE_ACTION).toBe("gpu-node.serve");
    const answer = await provider().complete({ model: "tiny", messages: [{ role: "user", content: "hi" }] }, new AbortController().signal);
    expect(answer.text).toBe("to tiny");
    const arrived: number[] = [];
    let text = "";
    for await (const chunk of await provider().stream({ model: "tiny", messages: [{ role: "user", content: "hi" }] }, new AbortController().signal))
      if (chunk.type === "delta") {
        text += chunk.text;
        arrived.push(Date.now());
      }
    expect(text).toBe("w0 w1 w2 w3 w4 ");
    expect(arrived[4] - arrived[0]).toBeGreaterThan(250);
  });

  test("inference deployments - the latin1 wire where the node speaks it, Buffers where it does not: every byte passes both ways", async () => {
    // Non-ASCII both ways: the request's model (UTF-8 in its JSON body) comes back in the answer.
    const model = "modèle-ß-日本-🙂";
    const latin1Provider = new OpenAiProvider(
      "deployment",
      "http://replica/v1",
      undefined,
      new ReplicaAgent(serveCall(inference, latin1Node.nodeID, JOB, 10_000)),
    );
    for (const [name, p] of [
      ["buffer", provider()],
      ["latin1", latin1Provider],
    ] as const) {
      asked.length = 0;
      const answer = await p.complete({ model, messages: [{ role: "user", content: "hi" }] }, new AbortController().signal);
      expect(answer.text).toBe(`to ${model}`);
      expect(await streamed(p)).toBe("w0 w1 ");
      expect(asked[0]).toEqual({ node: name, wire: name === "latin1" ? SERVE_WIRE : undefined, objectMode: name === "latin1" });
    }
  });

  test("inference deployments - a node answering what is not bytes (an object, a chunk over the limit) fails the request at once", async () => {
    for (const job of ["object", "oversized"]) {
      const agent = new ReplicaAgent(serveCall(inference, hostileNode.nodeID, job, 10_000));
      const started = Date.now();
      await expect(whole(new OpenAiProvider("deployment", "http://replica/v1", undefined, agent))).rejects.toBeDefined();
      expect(Date.now() - started).toBeLessThan(5000);
      agent.destroy();
    }
  });

  test("inference deployments - a client that goes away closes the replica's connection", async () => {
    const before = closedStreams;
    const control = new AbortController();
    // 100 words, 10 s: only the client's leaving ends it within the wait.
    const request = { model: "tiny", maxTokens: 100, messages: [{ role: "user" as const, content: "hi" }] };
    const chunks = (await provider().stream(request, control.signal))[Symbol.asyncIterator]();
    await chunks.next();
    control.abort();
    await expect(chunks.next()).rejects.toBeDefined();
    await waitFor(() => closedStreams > before, { timeoutMs: 2000, message: "the replica's connection closed" });
  });

  test("inference deployments - requests one after another reuse one connection", async () => {
    const agent = agentOf();
    const before = opened;
    for (let i = 0; i < 5; i++) expect(await whole(provider(agent))).toBe("to tiny");
    expect(await streamed(provider(agent))).toBe("w0 w1 ");
    expect(opened - before).toBe(1);
    expect(agent.inflight).toBe(0);
    agent.destroy();
  });

  test("inference deployments - 50 at once, whole, streamed and cancelled, twice: all answered, connections reused, none left in flight", async () => {
    const agent = agentOf();
    const p = provider(agent);
    const before = opened;
    for (let round = 0; round < 2; round++) {
      const kinds = Array.from({ length: 50 }, (_, i) => ["whole", "streamed", "cancelled"][i % 3]);
      const results = await Promise.all(kinds.map((k) => (k === "whole" ? whole(p) : k === "streamed" ? streamed(p) : cancelled(p))));
      expect(results).toEqual(kinds.map((k) => ({ whole: "to tiny", streamed: "w0 w1 ", cancelled: "cancelled" })[k]));
      await waitFor(() => agent.inflight === 0, { timeoutMs: 5000, message: "no request left in flight" });
    }
    // A cancelled request's connection is closed, not reused: the second round opens at most those again.
    expect(opened - before).toBeLessThanOrEqual(50 + 17);
    expect(await whole(p)).toBe("to tiny");
    agent.destroy();
  });

  test("inference deployments - a connection the server closed (idle, or the replica restarting) is not handed to the next request", async () => {
    const agent = agentOf();
    const p = provider(agent);
    await Promise.all(Array.from({ length: 10 }, () => whole(p)));
    await waitFor(() => open.size > 0, { timeoutMs: 2000, message: "kept-alive connections" });
    // The server closes every connection (as an idle timeout or a restarted replica does).
    server.closeAllConnections();
    await waitFor(() => open.size === 0, { timeoutMs: 2000, message: "the server's connections closed" });
    const answers = await Promise.all(Array.from({ length: 10 }, () => whole(p)));
    expect(answers).toEqual(Array(10).fill("to tiny"));
    expect(await streamed(p)).toBe("w0 w1 ");
    agent.destroy();
  });

  test("inference deployments - an idle connection is closed by the agent after its idle time", async () => {
    const agent = agentOf(200);
    const before = new Set(open);
    expect(await whole(provider(agent))).toBe("to tiny");
    const mine = [...open].filter((s) => !before.has(s));
    expect(mine).toHaveLength(1);
    await waitFor(() => !open.has(mine[0]), { timeoutMs: 3000, message: "the idle connection closed" });
    expect(await whole(provider(agent))).toBe("to tiny");
    agent.destroy();
  });
});
