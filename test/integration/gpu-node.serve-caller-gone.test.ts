/**
 * A request for a replica the node does not run, then the caller's process leaving (issue 29): the
 * node answers a clear error, and stays up. The serve action rejects; Moleculer then forgets the
 * request stream, and the caller's later packets of it (the request's bytes, or the end its tunnel
 * sends on the rejection) used to open a new stream no handler read, which Moleculer destroyed with
 * an error no one listened to once the caller's node left: the gpu-node process crashed ('Request
 * stream closed by …'). The node runs in its own process (the real gpu-node service over NATS);
 * callers are brokers in this one, on inference's path (deployments/tunnel.ts) or raw streams.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { PassThrough, type Readable } from "stream";
import type { ServiceBroker } from "moleculer";
import { SERVE_ACTION, SERVE_WIRE, type ServeMeta } from "../../lib/deployment-protocol";
import { getFrom, ReplicaAgent, serveCall } from "../../services/inference/deployments/tunnel";
import { ChildService, NATS_URL, sandboxedGpuEnv, spawnServices, testBroker, uniqueName } from "../support/platform";

const namespace = uniqueName("servegone");
const work = mkdtempSync(path.join(os.tmpdir(), "serve-gone-"));
let node: ChildService;
let callers = 0;

const nodeAlive = () => node.proc.exitCode === null && node.proc.signalCode === null;

/** A caller on inference's role, once it sees the node; and the node's id. */
async function caller(): Promise<{ broker: ServiceBroker; nodeID: string }> {
  const broker = testBroker({ transporter: NATS_URL, namespace, nodeID: `inference.gone-${++callers}` });
  await broker.start();
  // The node must still be there: a crash shows here, with its output, instead of a timeout.
  await broker.waitForServices("gpu-node", 30_000).catch((err: Error) => {
    throw new Error(`${err.message}; the node ${nodeAlive() ? "runs" : "exited"}:\n${node.output().slice(-3000)}`);
  });
  const nodeID = (broker.registry.getServiceList({ onlyAvailable: true }) as Array<{ name: string; nodeID: string }>).find(
    (s) => s.name === "gpu-node",
  )!.nodeID;
  return { broker, nodeID };
}

/** Inference's path: a GET through a deployment tunnel (latin1 wire, the request written before the answer). */
function throughTunnel(broker: ServiceBroker, nodeID: string, jobId: string): Promise<unknown> {
  const agent = new ReplicaAgent(serveCall(broker, nodeID, jobId, 10_000));
  return getFrom(agent, "/v1/models", 10_000).finally(() => agent.destroy());
}

/** A raw request stream on the Buffer wire, written to before and after the answer and never ended. */
async function rawStream(broker: ServiceBroker, nodeID: string, jobId: string): Promise<unknown> {
  const request = new PassThrough();
  request.write(Buffer.from("GET /v1/models HTTP/1.1\r\nhost: replica\r\n\r\n"));
  const meta: ServeMeta = { jobId };
  try {
    return await broker.call(SERVE_ACTION, request, { nodeID, meta });
  } finally {
    request.write(Buffer.from("more bytes of the request"));
  }
}

/** The same in object mode (the latin1 wire asked for in meta). */
async function rawLatin1(broker: ServiceBroker, nodeID: string, jobId: string): Promise<unknown> {
  const request = new PassThrough({ objectMode: true });
  request.write("GET /v1/models HTTP/1.1\r\nhost: replica\r\n\r\n");
  const meta: ServeMeta = { jobId, wire: SERVE_WIRE };
  try {
    return (await broker.call(SERVE_ACTION, request, { nodeID, meta })) as Readable;
  } finally {
    request.write("more bytes of the request");
  }
}

/**
 * A request stream for an action the node does not run, opened by hand (a caller's Moleculer only
 * sends to actions it knows): Moleculer answers that it is not there before any handler sees the
 * stream, which it still held with no one listening; the caller's node leaving then crashed the
 * node. The bytes that follow are dropped unread.
 */
async function noSuchAction(broker: ServiceBroker, nodeID: string): Promise<unknown> {
  const transit = broker.transit as unknown as {
    publish(packet: unknown): Promise<unknown>;
    pendingRequests: Map<string, { resolve(v: unknown): void; reject(e: unknown): void; action: { name: string }; nodeID: string; ctx: unknown }>;
  };
  const id = `raw-${uniqueName("req")}`;
  const payload = { id, action: "gpu-node.nothing", params: null, meta: {}, level: 1, stream: true, seq: 0 };
  const answered = new Promise((resolve, reject) =>
    transit.pendingRequests.set(id, { resolve, reject, action: { name: payload.action }, nodeID, ctx: { id, meta: {} } }),
  );
  await transit.publish({ type: "REQ", target: nodeID, payload });
  await transit.publish({ type: "REQ", target: nodeID, payload: { ...payload, seq: 1, params: Buffer.from("bytes after the refusal") } });
  return answered;
}

beforeAll(() => {
  node = spawnServices(["gpu-node"], { TRANSPORTER: NATS_URL, NAMESPACE: namespace, ...sandboxedGpuEnv(work, { GPU_RELAY_DIR: path.join(work, "relay") }) });
});

afterAll(async () => {
  await node?.stop("SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

describe.each([
  ["inference's tunnel", throughTunnel, "no-such-job", /The replica does not answer on this node/],
  ["a raw request stream (Buffer wire)", rawStream, "no-such-job", /The replica does not answer on this node/],
  ["a raw request stream (latin1 wire)", rawLatin1, "no-such-job", /The replica does not answer on this node/],
  ["a raw request stream, a job id that is no job's", rawLatin1, "../escape", /No such replica on this node/],
  ["a request stream for an action the node does not run", noSuchAction, "", /not registered|not found/i],
] as Array<[string, (broker: ServiceBroker, nodeID: string, jobId: string) => Promise<unknown>, string, RegExp]>)(
  "gpu-node serve - %s",
  (_name, request, jobId, refusal) => {
    test("gpu-node serve - a job the node does not run is a clear error, and the node outlives the caller's process leaving", async () => {
      const first = await caller();
      await expect(request(first.broker, first.nodeID, jobId)).rejects.toThrow(refusal);
      // The caller's process leaves (its node disconnects): the node drops what was pending from it.
      await first.broker.stop();
      // The node saw that before this caller's packets: it still answers, the same clear error.
      const second = await caller();
      try {
        await expect(request(second.broker, second.nodeID, jobId)).rejects.toThrow(refusal);
      } finally {
        await second.broker.stop();
      }
      expect(nodeAlive()).toBe(true);
      expect(node.output()).not.toMatch(/Unhandled 'error'|Request stream closed/);
    }, 90_000);
  },
);
