/**
 * The direct serve channel of a node (issue 29, opt-in with GPU_SERVE_LISTEN): the inference
 * service reaches a replica's port over one TLS connection to its node, not through the bus, so a
 * request skips the NATS server and Moleculer's stream packets both ways. Who may connect is still
 * decided on the bus: inference asks `gpu-node.serveTicket` (authenticated, callers: inference) for
 * one job and gets a ticket: a TLS 1.3 pre-shared key of 256 random bits and its identity, good
 * for one connection within TICKET_TTL_MS. The connection's handshake uses that key, so each side
 * knows the other holds what only the bus carried (no certificates), and the bytes are encrypted.
 * Then the node connects to that replica's serve socket (serve-relay.ts) and sends
 * SERVE_DIRECT_ACK, after which bytes pass both ways untouched. Anything else (no handshake within
 * HANDSHAKE_MS, an identity unknown, used or expired, another key, a replica that does not listen)
 * is closed with nothing of a replica's sent. The job itself still reaches nothing: the listener is
 * the node's, on the host's network, never inside a sandbox.
 */
import { randomBytes } from "crypto";
import net, { Socket } from "net";
import tls, { TLSSocket } from "tls";
import { SERVE_DIRECT_ACK, SERVE_TLS_CIPHERS, type ServeTicket } from "../../lib/deployment-protocol";
import { JOB_ID_PATTERN } from "./job";
import { serveSocketPath } from "./serve-relay";

/** How long a ticket may wait for its connection. */
export const TICKET_TTL_MS = 10_000;
/** How long a connection may take to complete its handshake. */
export const HANDSHAKE_MS = 5_000;
/** Connections still in their handshake, at most (more are closed at once). */
export const MAX_HANDSHAKES = 64;
/** Tickets issued and not yet used, at most (the oldest go first). */
export const MAX_TICKETS = 10_000;

export type DirectServeOptions = {
  relayDir: string;
  /** Where to listen (GPU_SERVE_LISTEN); port 0: any free one. */
  host: string;
  port: number;
  /** The host inference connects to (GPU_SERVE_ADDRESS); by default the listening one. */
  advertisedHost?: string;
  ticketTtlMs?: number;
  handshakeMs?: number;
  maxHandshakes?: number;
  /** The clock tickets lapse by (tests move it). */
  now?: () => number;
};

export class DirectServe {
  private server?: net.Server;
  private readonly context = tls.createSecureContext({ ciphers: SERVE_TLS_CIPHERS, minVersion: "TLSv1.3" });
  private address = "";
  /** Ticket identity → its key, job and when it lapses; in the order issued. */
  private readonly tickets = new Map<string, { key: Buffer; jobId: string; until: number }>();
  private readonly open = new Set<Socket>();
  private handshakes = 0;
  /** Connections that reached a replica, since the start. */
  served = 0;

  private readonly now: () => number;

  constructor(private readonly opts: DirectServeOptions) {
    this.now = opts.now ?? Date.now;
  }

  async listen(): Promise<void> {
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (raw) => this.accept(raw));
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(this.opts.port, this.opts.host, () => resolve()));
    const { port } = server.address() as net.AddressInfo;
    this.server = server;
    const host = this.opts.advertisedHost ?? this.opts.host;
    this.address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  }

  /** A ticket for one connection to `jobId`'s port (the job is checked when it is used: it may not serve yet). */
  ticket(jobId: string): ServeTicket {
    if (!this.server) throw new Error("The direct serve channel is not listening");
    const now = this.now();
    for (const [identity, t] of this.tickets) {
      if (t.until > now && this.tickets.size < MAX_TICKETS) break;
      this.tickets.delete(identity);
    }
    const identity = randomBytes(16).toString("hex");
    const key = randomBytes(32);
    this.tickets.set(identity, { key, jobId, until: now + (this.opts.ticketTtlMs ?? TICKET_TTL_MS) });
    return { address: this.address, ticket: identity, key: key.toString("base64") };
  }

  get outstandingTickets(): number {
    return this.tickets.size;
  }

  /** Connections that have not completed their handshake yet. */
  get waitingHandshakes(): number {
    return this.handshakes;
  }

  async close(): Promise<void> {
    for (const socket of this.open) socket.destroy();
    this.tickets.clear();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }

  /** A new connection: its TLS handshake with a ticket's key within HANDSHAKE_MS (past MAX_HANDSHAKES waiting, closed at once). */
  private accept(raw: Socket): void {
    if (this.handshakes >= (this.opts.maxHandshakes ?? MAX_HANDSHAKES)) return void raw.destroy();
    this.handshakes += 1;
    this.open.add(raw);
    raw.on("error", () => undefined);
    let jobId: string | undefined;
    const client = new tls.TLSSocket(raw, {
      isServer: true,
      secureContext: this.context,
      pskCallback: (_socket: TLSSocket, identity: string) => {
        const entry = this.redeem(identity);
        jobId = entry?.jobId;
        return entry?.key ?? null;
      },
    } as tls.TLSSocketOptions);
    client.on("error", () => undefined);
    let waiting = true;
    const settle = () => {
      if (waiting) this.handshakes -= 1;
      waiting = false;
      clearTimeout(deadline);
    };
    const deadline = setTimeout(() => (settle(), client.destroy()), this.opts.handshakeMs ?? HANDSHAKE_MS);
    client.once("close", () => (settle(), this.open.delete(raw)));
    client.once("secure", () => {
      settle();
      if (jobId) this.connectReplica(client, jobId);
      else client.destroy();
    });
  }

  /** The ticket's key and job, once: a ticket is forgotten as it is used, and one past its time is refused. */
  private redeem(identity: string): { key: Buffer; jobId: string } | undefined {
    const entry = this.tickets.get(identity);
    if (!entry) return undefined;
    this.tickets.delete(identity);
    return entry.until > this.now() && JOB_ID_PATTERN.test(entry.jobId) ? entry : undefined;
  }

  private connectReplica(client: TLSSocket, jobId: string): void {
    client.pause();
    const replica = net.connect({ path: serveSocketPath(this.opts.relayDir, jobId), allowHalfOpen: true });
    replica.on("error", () => client.destroy());
    client.once("close", () => replica.destroy());
    // A replica that ended cleanly: what it sent is still written out before the client's end.
    replica.once("close", (hadError) => (hadError ? client.destroy() : client.end()));
    replica.once("connect", () => {
      this.served += 1;
      replica.setNoDelay(true);
      client.write(SERVE_DIRECT_ACK);
      client.pipe(replica);
      replica.pipe(client);
      client.resume();
    });
  }
}
