/**
 * HTTP to a deployment's replica (issue 29), through the gpu-node that runs it: each connection
 * is one `gpu-node.serve` call on that node over the bus (authenticated; callers: inference),
 * whose request stream carries the bytes written here and whose answer stream the bytes read
 * back; the node pipes them to the replica's port inside its sandbox (services/gpu-node/serve-relay.ts).
 * An http.Agent makes these connections, so the provider adapter (providers/openai.ts) speaks to
 * a replica exactly as to any OpenAI-compatible server. Closing the connection (a client gone)
 * closes the replica's. The agent counts the requests in flight to its replica.
 */
import http from "http";
import { Duplex, PassThrough, type Readable } from "stream";
import { SERVE_ACTION, type ServeMeta } from "../../../lib/deployment-protocol";

/** Calls the replica's node: `request` is what to send, the answer what the replica sends back. */
export type ServeCall = (request: Readable) => Promise<Readable>;

/** The bus call of `jobId` on `nodeId`, as a ServeCall. */
export function serveCall(
  broker: { call(action: string, params: unknown, opts: { nodeID: string; meta: ServeMeta; timeout: number }): Promise<unknown> },
  nodeId: string,
  jobId: string,
  timeoutMs: number,
): ServeCall {
  return async (request) => (await broker.call(SERVE_ACTION, request, { nodeID: nodeId, meta: { jobId }, timeout: timeoutMs })) as Readable;
}

/** One connection: writes go out on the call's request stream, reads come from its answer. */
export class Tunnel extends Duplex {
  private readonly outgoing = new PassThrough();
  private incoming?: Readable;

  constructor(call: ServeCall) {
    super({ allowHalfOpen: true });
    // Destroyed with an error to tell the node to cut the connection: nothing else listens here.
    this.outgoing.on("error", () => undefined);
    call(this.outgoing).then(
      (incoming) => {
        if (this.destroyed) return void incoming.destroy();
        this.incoming = incoming;
        incoming.on("data", (chunk: Buffer) => this.push(chunk) || incoming.pause());
        incoming.once("end", () => this.push(null));
        incoming.once("error", (err) => this.destroy(err));
        incoming.once("close", () => this.readableEnded || this.destroy(new Error("The replica closed the connection")));
      },
      (err: Error) => this.destroy(err),
    );
  }

  override _read(): void {
    this.incoming?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.outgoing.write(chunk)) callback();
    else this.outgoing.once("drain", () => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.outgoing.end();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    // An error (not an end) tells the node to cut the replica's connection.
    if (!this.outgoing.writableFinished) this.outgoing.destroy(err ?? new Error("closed"));
    this.incoming?.destroy();
    callback(err);
  }

  // What http's client calls on a socket; a tunnel has no options of its own.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

/** An agent whose every connection is a new tunnel to one replica; `inflight` counts those open. */
export class ReplicaAgent extends http.Agent {
  inflight = 0;

  constructor(private readonly call: ServeCall) {
    super({ keepAlive: false });
  }

  override createConnection(): Duplex {
    const tunnel = new Tunnel(this.call);
    // The request that uses it hears its errors; one before the request listens must not go unhandled.
    tunnel.on("error", () => undefined);
    this.inflight += 1;
    tunnel.once("close", () => (this.inflight -= 1));
    return tunnel;
  }
}

/** GET `path` on the replica: its status and (small) body; rejects when it does not answer within `timeoutMs`. */
export function getFrom(agent: http.Agent, path: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "replica", path, method: "GET", agent, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body.length < 65536 ? (body += c) : res.destroy()));
      res.once("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.once("error", reject);
    });
    req.once("timeout", () => req.destroy(new Error("The replica did not answer in time")));
    req.once("error", reject);
    req.end();
  });
}
