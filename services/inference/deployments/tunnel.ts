/**
 * HTTP to a deployment's replica (issue 29), through the gpu-node that runs it: each connection
 * is one `gpu-node.serve` call on that node over the bus (authenticated; callers: inference),
 * whose request stream carries the bytes written here and whose answer stream the bytes read
 * back; the node pipes them to the replica's port inside its sandbox (services/gpu-node/serve-relay.ts).
 * An http.Agent makes these connections, so the provider adapter (providers/openai.ts) speaks to
 * a replica exactly as to any OpenAI-compatible server. Connections are kept alive between
 * requests (one bus call, node socket and replica connection serve many requests); closing one
 * (a client gone) closes the replica's. The agent counts the requests in flight to its replica.
 * The bytes travel on the latin1 wire where the node speaks it (lib/deployment-protocol.ts).
 * Where the node has a direct serve channel (GPU_SERVE_LISTEN, services/gpu-node/serve-direct.ts),
 * a connection is instead one TLS connection to the node, keyed by a ticket asked on the bus.
 */
import http from "http";
import tls, { type TLSSocket } from "tls";
import { Duplex, PassThrough, type Readable } from "stream";
import {
  fromWire,
  SERVE_ACTION,
  SERVE_DIRECT_ACK,
  SERVE_TICKET_ACTION,
  SERVE_TLS_CIPHERS,
  SERVE_WIRE,
  toWire,
  type ServeMeta,
  type ServeTicket,
} from "../../../lib/deployment-protocol";

/**
 * Calls the replica's node: `request` is what to send, the answer what the replica sends back;
 * `latin1`: both as latin1-wire strings (object-mode streams), else as bytes. `latin1()`: whether
 * the node speaks that wire (asked once per connection).
 */
export type ServeCall = {
  latin1(): boolean;
  call(request: Readable, latin1: boolean): Promise<Readable>;
  /** A ticket for the node's direct channel (null: the node has none); absent: only the bus is used. */
  ticket?(): Promise<ServeTicket | null>;
};

type ServeBroker = {
  call(action: string, params: unknown, opts: { nodeID: string; meta: ServeMeta; timeout: number }): Promise<unknown>;
  registry: unknown;
};
type Endpoints = { getActionEndpointByNodeId(action: string, nodeID: string): { action?: { wire?: unknown } } | null | undefined };

/** The bus call of `jobId` on `nodeId`, as a ServeCall; the node's `serve` schema in the registry says which wire it speaks. */
export function serveCall(broker: ServeBroker, nodeId: string, jobId: string, timeoutMs: number): ServeCall {
  return {
    latin1: () => (broker.registry as Endpoints).getActionEndpointByNodeId(SERVE_ACTION, nodeId)?.action?.wire === SERVE_WIRE,
    call: async (request, latin1) => {
      const meta: ServeMeta = latin1 ? { jobId, wire: SERVE_WIRE } : { jobId };
      return (await broker.call(SERVE_ACTION, request, { nodeID: nodeId, meta, timeout: timeoutMs })) as Readable;
    },
    ticket: async () =>
      (broker.registry as Endpoints).getActionEndpointByNodeId(SERVE_TICKET_ACTION, nodeId)
        ? ((await broker.call(SERVE_TICKET_ACTION, { jobId }, { nodeID: nodeId, meta: { jobId }, timeout: timeoutMs })) as ServeTicket | null)
        : null,
  };
}

/**
 * A connection through the node's direct channel (services/gpu-node/serve-direct.ts): TLS 1.3 with
 * the ticket's pre-shared key (so only the node that issued it can complete the handshake, and an
 * address that is not that node never gets a request), then the node's acknowledgement; then the
 * socket is the replica's. Fails with `ECONNREFUSED` when the handshake or the acknowledgement
 * fails or does not come within `timeoutMs`: nothing of a request went out.
 */
export function connectDirect({ address, ticket, key }: ServeTicket, timeoutMs: number): Promise<TLSSocket> {
  const at = address.lastIndexOf(":");
  const host = address.slice(0, at).replace(/^\[|\]$/g, "");
  const port = Number(address.slice(at + 1));
  const psk = Buffer.from(key, "base64");
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host,
      port,
      ciphers: SERVE_TLS_CIPHERS,
      minVersion: "TLSv1.3",
      // The key authenticates the node: there is no certificate to check.
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk, identity: ticket }),
    });
    socket.setNoDelay(true);
    let heard = Buffer.alloc(0);
    const fail = (why: string) => {
      socket.destroy();
      reject(Object.assign(new Error(`The replica cannot be reached: ${why}`), { code: "ECONNREFUSED" }));
    };
    const timer = setTimeout(() => fail("its node did not answer in time"), timeoutMs);
    const onData = (chunk: Buffer) => {
      heard = Buffer.concat([heard, chunk]);
      if (heard.length < ACK.length) return;
      clearTimeout(timer);
      // Flowing on: http's client listens from the next tick, before the socket is read again.
      socket.off("data", onData).off("error", onError).off("close", onClose);
      if (!heard.subarray(0, ACK.length).equals(ACK)) return fail("its node refused the connection");
      if (heard.length > ACK.length) socket.unshift(heard.subarray(ACK.length));
      resolve(socket);
    };
    const onError = (err: Error) => (clearTimeout(timer), fail(err.message));
    const onClose = () => (clearTimeout(timer), fail("its node closed the connection"));
    socket.on("data", onData).once("error", onError).once("close", onClose);
  });
}
const ACK = Buffer.from(SERVE_DIRECT_ACK, "latin1");
const ignore = () => undefined;

/** How long a connection no request uses stays open (below the 5 s idle limit of common servers: Node.js, uvicorn). */
export const IDLE_TUNNEL_MS = 4000;

/** A connection the replica (or its node) closed: `ECONNRESET`, which a request on a reused one retries (providers/http.ts). */
const closedByReplica = () => Object.assign(new Error("The replica closed the connection"), { code: "ECONNRESET" });

/**
 * The node refused the connection (it runs no such replica, or the replica does not listen: it
 * just ended), or the node is gone: `ECONNREFUSED`, as a refused TCP connection, since nothing of
 * the request reached a replica (providers/http.ts marks it so; the router then tries another
 * replica). A call that timed out may have been under way: it stays what it was.
 */
const unreachable = (err: Error) =>
  err.name === "RequestTimeoutError" ? err : Object.assign(new Error(`The replica cannot be reached: ${err.message}`), { code: "ECONNREFUSED" });

/**
 * One connection: writes go out on the call's request stream, reads come from its answer. Kept
 * alive by its agent between requests; ends (and leaves the agent's pool) as soon as the replica's
 * side ends, so a closed connection is never handed to the next request.
 */
export class Tunnel extends Duplex {
  private readonly latin1: boolean;
  private readonly outgoing: PassThrough;
  private incoming?: Readable;
  private idle?: NodeJS.Timeout;
  /** net.Socket's: the idle time after which 'timeout' is emitted (0: never); the agent reads it. */
  timeout = 0;

  constructor(call: ServeCall) {
    super({ allowHalfOpen: true });
    this.latin1 = call.latin1();
    this.outgoing = new PassThrough({ objectMode: this.latin1 });
    // Destroyed with an error to tell the node to cut the connection: nothing else listens here.
    this.outgoing.on("error", () => undefined);
    call.call(this.outgoing, this.latin1).then(
      (incoming) => {
        if (this.destroyed) return void incoming.destroy();
        this.incoming = incoming;
        incoming.on("data", (chunk: unknown) => {
          this.idle?.refresh();
          let bytes: Buffer;
          try {
            bytes = fromWire(chunk);
          } catch (err) {
            return void this.destroy(err as Error);
          }
          if (!this.push(bytes)) incoming.pause();
        });
        incoming.once("end", () => this.remoteEnded());
        incoming.once("error", (err) => this.destroy(err));
        incoming.once("close", () => this.readableEnded || this.destroy(closedByReplica()));
      },
      (err: Error) => this.destroy(unreachable(err)),
    );
  }

  /** The replica's side ended: what it sent is still read, but no request goes out on this connection again. */
  private remoteEnded(): void {
    this.push(null);
    // A pooled (free) connection has no request of http's: it goes now, not when the next request picks it.
    if (!(this as { _httpMessage?: unknown })._httpMessage) this.destroy();
    else this.end();
  }

  override _read(): void {
    this.incoming?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.idle?.refresh();
    let ready = true;
    if (!this.latin1) ready = this.outgoing.write(chunk);
    else for (const part of toWire(chunk)) ready = this.outgoing.write(part);
    if (ready) callback();
    else this.outgoing.once("drain", () => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.outgoing.end();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    clearTimeout(this.idle);
    // An error (not an end) tells the node to cut the replica's connection.
    if (!this.outgoing.writableFinished) this.outgoing.destroy(err ?? new Error("closed"));
    this.incoming?.destroy();
    callback(err);
  }

  /** As net.Socket's: 'timeout' after `ms` without bytes either way (the agent closes an idle pooled connection on it). */
  setTimeout(ms: number, callback?: () => void): this {
    clearTimeout(this.idle);
    this.idle = undefined;
    this.timeout = ms;
    if (callback) this[ms ? "once" : "removeListener"]("timeout", callback);
    if (ms > 0 && !this.destroyed) this.idle = setTimeout(() => this.emit("timeout"), ms).unref();
    return this;
  }

  // What http's client calls on a socket; a tunnel has no options of its own.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

/**
 * The agent of one replica: keep-alive tunnels (a request reuses an idle one, last used first, so
 * few stay open; one idle IDLE_TUNNEL_MS closes), and `inflight`, the requests in flight there.
 */
export class ReplicaAgent extends http.Agent {
  inflight = 0;
  /** Whether the replica's node has a direct channel (unknown until asked). */
  direct?: boolean;

  constructor(
    private readonly call: ServeCall,
    idleMs = IDLE_TUNNEL_MS,
    /** How long a direct connection may take to be acknowledged. */
    private readonly timeoutMs = 10_000,
  ) {
    super({ keepAlive: true, scheduling: "lifo", timeout: idleMs });
  }

  /**
   * A connection to the replica: through the node's direct channel when it has one (asked once per
   * agent; a node without it answers null), else, or when the channel fails, a bus tunnel. http's
   * agent takes either at once or through `created`.
   */
  override createConnection(_options: unknown, created: (err: Error | null, socket?: Duplex) => void): Duplex | undefined {
    if (this.direct === false || !this.call.ticket) return this.tunnel();
    this.call.ticket().then(
      (ticket) => {
        if (!ticket) {
          this.direct = false;
          return created(null, this.tunnel());
        }
        this.direct = true;
        connectDirect(ticket, this.timeoutMs).then(
          // As a tunnel's: an error before a request listens must not go unhandled.
          (socket) => created(null, socket.on("error", ignore)),
          // The channel refused or did not answer (busy, or the replica gone): this connection goes
          // over the bus, which says which it was (a replica gone is refused there too).
          () => created(null, this.tunnel()),
        );
      },
      (err: Error) => created(unreachable(err)),
    );
    return undefined;
  }

  private tunnel(): Tunnel {
    const tunnel = new Tunnel(this.call);
    // The request that uses it hears its errors; one before the request listens must not go unhandled.
    tunnel.on("error", ignore);
    return tunnel;
  }

  /** http's: every request passes here once, and its 'close' comes once (answered, failed or cancelled). */
  addRequest(req: http.ClientRequest, options: unknown): void {
    this.inflight += 1;
    req.once("close", () => (this.inflight -= 1));
    (http.Agent.prototype as unknown as { addRequest(r: http.ClientRequest, o: unknown): void }).addRequest.call(this, req, options);
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
