/**
 * The direct serve channel of a node (issue 29, opt-in with GPU_SERVE_LISTEN): the inference
 * service reaches a replica's port over one TCP connection to its node, not through the bus, so a
 * request skips the NATS server and Moleculer's stream packets both ways. Who may connect is still
 * decided on the bus: inference asks `gpu-node.serveTicket` (authenticated, callers: inference) for
 * one job and gets a ticket, 256 random bits, good for one connection within TICKET_TTL_MS. The
 * connection's first line is the ticket; then the node connects to that replica's serve socket
 * (serve-relay.ts) and answers SERVE_DIRECT_ACK, after which bytes pass both ways untouched.
 * Anything else (no ticket in HANDSHAKE_MS, an unknown, used or expired one, a replica that does
 * not listen) is closed with nothing sent. The job itself still reaches nothing: the listener is
 * the node's, on the host's network, never inside a sandbox.
 */
import { randomBytes } from "crypto";
import net, { Server, Socket } from "net";
import { SERVE_DIRECT_ACK, SERVE_TICKET_CHARS, type ServeTicket } from "../../lib/deployment-protocol";
import { JOB_ID_PATTERN } from "./job";
import { serveSocketPath } from "./serve-relay";

/** How long a ticket may wait for its connection. */
export const TICKET_TTL_MS = 10_000;
/** How long a connection may take to send its ticket. */
export const HANDSHAKE_MS = 5_000;
/** Connections still to send their ticket, at most (more are closed at once). */
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
};

export class DirectServe {
  private server?: Server;
  private address = "";
  /** Ticket → its job and when it lapses; in the order issued. */
  private readonly tickets = new Map<string, { jobId: string; until: number }>();
  private readonly open = new Set<Socket>();
  private handshakes = 0;
  /** Connections that reached a replica, since the start. */
  served = 0;

  constructor(private readonly opts: DirectServeOptions) {}

  async listen(): Promise<void> {
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(this.opts.port, this.opts.host, () => resolve()));
    const { port } = server.address() as net.AddressInfo;
    this.server = server;
    const host = this.opts.advertisedHost ?? this.opts.host;
    this.address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  }

  /** A ticket for one connection to `jobId`'s port (the job is checked when it is used: it may not serve yet). */
  ticket(jobId: string): ServeTicket {
    if (!this.server) throw new Error("The direct serve channel is not listening");
    const now = Date.now();
    for (const [key, t] of this.tickets) {
      if (t.until > now && this.tickets.size < MAX_TICKETS) break;
      this.tickets.delete(key);
    }
    const ticket = randomBytes(32).toString("base64url");
    this.tickets.set(ticket, { jobId, until: now + (this.opts.ticketTtlMs ?? TICKET_TTL_MS) });
    return { address: this.address, ticket };
  }

  get outstandingTickets(): number {
    return this.tickets.size;
  }

  /** Connections that have not sent their ticket yet. */
  get waitingHandshakes(): number {
    return this.handshakes;
  }

  async close(): Promise<void> {
    for (const socket of this.open) socket.destroy();
    this.tickets.clear();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }

  private accept(client: Socket): void {
    if (this.handshakes >= (this.opts.maxHandshakes ?? MAX_HANDSHAKES)) return void client.destroy();
    this.handshakes += 1;
    this.open.add(client);
    client.once("close", () => this.open.delete(client));
    client.on("error", () => undefined);
    let settled = false;
    let buffered = Buffer.alloc(0);
    const finish = () => {
      if (settled) return false;
      settled = true;
      this.handshakes -= 1;
      clearTimeout(deadline);
      client.off("data", onData);
      client.off("end", refuse);
      client.off("close", refuse);
      return true;
    };
    const refuse = () => finish() && client.destroy();
    const deadline = setTimeout(refuse, this.opts.handshakeMs ?? HANDSHAKE_MS);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length <= SERVE_TICKET_CHARS) return;
      client.pause();
      finish();
      const line = buffered.subarray(0, SERVE_TICKET_CHARS + 1).toString("latin1");
      const entry = line.endsWith("\n") ? this.redeem(line.slice(0, -1)) : undefined;
      if (!entry) return void client.destroy();
      this.connectReplica(client, entry.jobId, buffered.subarray(SERVE_TICKET_CHARS + 1));
    };
    client.on("data", onData).once("end", refuse).once("close", refuse);
  }

  /** The ticket's job, once: a ticket is forgotten as it is used, and one past its time is refused. */
  private redeem(ticket: string): { jobId: string } | undefined {
    const entry = this.tickets.get(ticket);
    if (!entry) return undefined;
    this.tickets.delete(ticket);
    return entry.until > Date.now() && JOB_ID_PATTERN.test(entry.jobId) ? entry : undefined;
  }

  private connectReplica(client: Socket, jobId: string, early: Buffer): void {
    const replica = net.connect({ path: serveSocketPath(this.opts.relayDir, jobId), allowHalfOpen: true });
    replica.on("error", () => client.destroy());
    client.once("close", () => replica.destroy());
    // A replica that ended cleanly: what it sent is still written out before the client's end.
    replica.once("close", (hadError) => (hadError ? client.destroy() : client.end()));
    replica.once("connect", () => {
      this.served += 1;
      replica.setNoDelay(true);
      client.write(SERVE_DIRECT_ACK);
      if (early.length) replica.write(early);
      client.pipe(replica);
      replica.pipe(client);
      client.resume();
    });
  }
}
