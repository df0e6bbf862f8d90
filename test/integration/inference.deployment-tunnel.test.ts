/**
 * The tunnel to a deployment's replica across processes' bus (issue 29): the inference side's
 * agent (deployments/tunnel.ts) and the node's serve relay (gpu-node serve-relay.ts) on two brokers
 * over real NATS, with an OpenAI-compatible server on the serve socket standing in for the job's
 * forwarder and replica. A whole answer, a stream arriving chunk by chunk, and a client that stops
 * reading closing the server's connection.
 */
import { mkdirSync, mkdtempSync, rmSync } from "fs";
import http from "http";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import type { Readable } from "stream";
import { SERVE_ACTION, type ServeMeta } from "../../lib/deployment-protocol";
import { connectServe, SERVE_SOCKET, serveDir } from "../../services/gpu-node/serve-relay";
import { OpenAiProvider } from "../../services/inference/providers/openai";
import { ReplicaAgent, serveCall } from "../../services/inference/deployments/tunnel";
import { NATS_URL, uniqueName, waitFor } from "../support/platform";

const JOB = "job-1";

describe("inference deployments - the tunnel to a replica over NATS", () => {
  const relayDir = mkdtempSync(path.join(os.tmpdir(), "tunnel-"));
  const namespace = uniqueName("tunnel");
  const node = new ServiceBroker({ namespace, nodeID: uniqueName("node"), transporter: NATS_URL, logger: false });
  const inference = new ServiceBroker({ namespace, nodeID: uniqueName("inf"), transporter: NATS_URL, logger: false });
  let server: http.Server;
  let closedStreams = 0;

  beforeAll(async () => {
    mkdirSync(serveDir(relayDir, JOB), { recursive: true });
    server = http.createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => (raw += c));
      req.on("end", () => {
        const body = JSON.parse(raw || "{}");
        if (!body.stream) {
          res.writeHead(200, { "content-type": "application/json" });
          return res.end(
            JSON.stringify({
              choices: [{ message: { content: `to ${body.model}` }, finish_reason: "stop" }],
              usage: { prompt_tokens: 1, completion_tokens: 2 },
            }),
          );
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.once("close", () => (closedStreams += 1));
        let n = 0;
        const timer = setInterval(() => {
          if (n === (body.max_tokens ?? 5)) {
            clearInterval(timer);
            return res.end("data: [DONE]\n\n");
          }
          res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: `w${n++} ` } }] })}\n\n`);
        }, 100);
        res.once("close", () => clearInterval(timer));
      });
    });
    await new Promise<void>((resolve) => server.listen(path.join(serveDir(relayDir, JOB), SERVE_SOCKET), resolve));
    node.createService({
      name: "gpu-node",
      actions: { serve: { handler: (ctx: { params: Readable; meta: ServeMeta }) => connectServe(relayDir, ctx.meta.jobId, ctx.params) } },
    });
    await Promise.all([node.start(), inference.start()]);
    await inference.waitForServices("gpu-node");
  });

  afterAll(async () => {
    await Promise.all([node.stop(), inference.stop()]);
    server.close();
    rmSync(relayDir, { recursive: true, force: true });
  });

  const provider = () => new OpenAiProvider("deployment", "http://replica/v1", undefined, new ReplicaAgent(serveCall(inference, node.nodeID, JOB, 10_000)));

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
});
