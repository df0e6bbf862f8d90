/**
 * A model deployment's streamed answers on the authenticated bus (issue 29): the receivers cap
 * each gpu-node's RES packets (lib/bus-budget.ts, checked in lib/nats-transporter.ts before a
 * packet is parsed), and every chunk a replica writes used to become one RES packet, so a few
 * concurrent token streams through one node went over it: chunks dropped, streams stalled. Here
 * replica-like servers behind the node's serve relay (serveAnswer, what `gpu-node.serve` returns)
 * write many small chunks on several requests at once, over Debian's nats-server with the
 * platform's generated users; every byte must arrive, in order. A node that does not pace (an older
 * or hostile one) has packets dropped: its stream fails at once with the loss named, not stalled
 * until a timeout (lib/stream-sequences.ts).
 */
import { mkdirSync, mkdtempSync, rmSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import { PassThrough, type Readable } from "stream";
import { ServiceBroker } from "moleculer";
import { connectServe, SERVE_SOCKET, serveAnswer, serveDir } from "../../services/gpu-node/serve-relay";
import { BusServer, busBroker as startBroker, startBusServer } from "../support/bus-server";
import { uniqueName } from "../support/platform";

const namespace = uniqueName("servebudget");
const JOB = "job-serve-budget";
const STREAMS = 6;
const CHUNKS = 2000; // 12,000 packets unpaced: well past the receivers' RES burst (4,000)
let server: BusServer;
let relayDir: string;
let replica: net.Server;
const connections = new Set<net.Socket>();
const brokers: ServiceBroker[] = [];

/** What the replica answers to request `n`: CHUNKS small lines, as SSE tokens are. */
const line = (n: number, i: number) => `data: {"stream":${n},"token":${i}}\n\n`;
const expected = (n: number) => Array.from({ length: CHUNKS }, (_, i) => line(n, i)).join("");

const busBroker = (user: string, nodeID: string, services: Parameters<ServiceBroker["createService"]>[0][] = []) =>
  startBroker(server, { namespace, user, nodeID, services, requestTimeout: 60_000 }, brokers);

/** Writes each chunk on its own, one per macrotask (as a server flushing every token does). */
function streamTokens(socket: net.Socket, n: number): void {
  let i = 0;
  const next = () => {
    if (socket.destroyed) return;
    if (i === CHUNKS) return void socket.end();
    socket.write(line(n, i++));
    setImmediate(next);
  };
  next();
}

/** The whole answer to request `n`, or a rejection when it stalls past `ms`. */
function answerOf(stream: Readable, ms: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => reject(new Error(`stalled after ${Buffer.concat(chunks).length} bytes`)), ms);
    stream.on("data", (c: Buffer) => chunks.push(Buffer.from(c)));
    stream.once("end", () => (clearTimeout(timer), resolve(Buffer.concat(chunks).toString())));
    stream.once("error", (err) => (clearTimeout(timer), reject(err)));
  });
}

beforeAll(async () => {
  server = await startBusServer({ namespace, gpuNodes: ["n1", "n2"] });
  relayDir = mkdtempSync(path.join(os.tmpdir(), "serve-budget-"));
  const dir = serveDir(relayDir, JOB);
  mkdirSync(dir, { recursive: true });
  // The replica's forwarder's socket, answering on it directly: "<n>\n" asks for stream n.
  replica = net.createServer((socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
    let head = "";
    socket.on("data", (c: Buffer) => {
      head += c.toString();
      if (head.includes("\n")) streamTokens(socket, Number(head.split("\n")[0]));
    });
  });
  await new Promise<void>((resolve) => replica.listen(path.join(dir, SERVE_SOCKET), resolve));
  await busBroker("gpu-node.n1", "gpu-node.n1", [
    { name: "gpu-node", actions: { serve: { handler: (ctx: { params: Readable }) => serveAnswer(relayDir, JOB, ctx.params) } } },
  ]);
  // Unpaced: every chunk the replica writes is a RES packet.
  await busBroker("gpu-node.n2", "gpu-node.n2", [
    { name: "gpu-node", actions: { serve: { handler: (ctx: { params: Readable }) => connectServe(relayDir, JOB, ctx.params) } } },
  ]);
}, 60_000);

afterAll(async () => {
  for (const b of brokers) await b.stop().catch(() => undefined);
  // A stalled answer's connection would keep the server open: the replica goes first.
  for (const socket of connections) socket.destroy();
  await new Promise((resolve) => replica?.close(resolve));
  await server?.stop();
  rmSync(relayDir, { recursive: true, force: true });
});

test("concurrent token streams through one node arrive whole and in order over the budgeted bus", async () => {
  const inference = await busBroker("inference", "inference.t1");
  await inference.waitForServices("gpu-node", 20_000);
  const answers = await Promise.all(
    Array.from({ length: STREAMS }, async (_, n) => {
      const request = new PassThrough();
      const answer = (await inference.call("gpu-node.serve", request, { nodeID: "gpu-node.n1" })) as Readable;
      request.write(`${n}\n`);
      return answerOf(answer, 30_000);
    }),
  );
  answers.forEach((text, n) => expect(text).toBe(expected(n)));
}, 90_000);

test("a node's stream that loses packets over its budget fails at once, the loss named, instead of stalling", async () => {
  const inference = await busBroker("inference", "inference.t2");
  await inference.waitForServices("gpu-node", 20_000);
  const lost = (f: string) => /^A stream from gpu-node\.n2 lost packets: #\d+ to #\d+ never arrived$/.test(f);
  // Over the budget some stream loses packets (each that does fails; one may finish before the
  // drops). A loaded machine may send slower than the budget refills: more streams at once, then.
  let failures: string[] = [];
  for (const streams of [STREAMS, 2 * STREAMS, 4 * STREAMS]) {
    const started = Date.now();
    failures = await Promise.all(
      Array.from({ length: streams }, async (_, n) => {
        const request = new PassThrough();
        const answer = (await inference.call("gpu-node.serve", request, { nodeID: "gpu-node.n2" })) as Readable;
        request.write(`${n % STREAMS}\n`);
        return answerOf(answer, 30_000).then(
          () => "whole",
          (err: Error) => err.message,
        );
      }),
    );
    expect(failures.every((f) => f === "whole" || lost(f))).toBe(true);
    expect(Date.now() - started).toBeLessThan(15_000 * (streams / STREAMS));
    if (failures.some(lost)) break;
  }
  expect(failures.filter(lost).length).toBeGreaterThan(0);
}, 150_000);
