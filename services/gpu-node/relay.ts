/**
 * The node-side relay of a job with platform access (issue 28): a folder of its own holding two
 * unix sockets, each piping every accepted connection to its one fixed destination — the
 * platform's HTTP API and the tenant PostgreSQL server (GPU_RELAY_* settings). No address ever
 * comes from the job: what it reaches is exactly those two. The job's side (relay-forwarder.ts)
 * turns them into loopback ports. PostgreSQL: the job's leg (inside this host) is plain, and the
 * relay itself negotiates TLS with the tenant server, so psql, libpq and `pg` all work unchanged
 * with one URL, and the server's certificate is checked by the node, not by each client.
 */
import { promises as fs } from "fs";
import net, { Server, Socket } from "net";
import path from "path";
import tls from "tls";
import { DATABASE_SOCKET, PLATFORM_SOCKET } from "./relay-forwarder";

/** How the relay talks to the tenant server: as libpq's sslmode (verify-full checks name and CA). */
export const RELAY_SSL_MODES = ["disable", "prefer", "require", "verify-full"] as const;
export type RelaySslMode = (typeof RELAY_SSL_MODES)[number];

export type RelayDestinations = {
  /** The platform's HTTP API (https: the relay speaks TLS to it). */
  platform?: { host: string; port: number; tls: boolean; /** The API's path prefix, if any (part of CI_PLATFORM_URL). */ path: string };
  database?: { host: string; port: number; sslMode: RelaySslMode; ca?: Buffer };
};

/** Connections one job may hold open through each of its sockets at once. */
export const RELAY_MAX_CONNECTIONS = 256;

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/** The next chunk a paused socket receives (rejects when it closes first). */
function nextChunk(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const done = () => (socket.off("data", onData), socket.off("close", onClose), socket.off("error", onClose));
    const onData = (chunk: Buffer) => (done(), socket.pause(), resolve(chunk));
    const onClose = () => (done(), reject(new Error("closed during the relay's handshake")));
    socket.on("data", onData).once("close", onClose).once("error", onClose).resume();
  });
}

const connected = (socket: Socket, event = "connect"): Promise<Socket> =>
  new Promise((resolve, reject) => socket.once(event, () => (socket.off("error", reject), resolve(socket))).once("error", reject));

/** The client's first bytes once it stops asking for encryption (each SSLRequest or GSSENCRequest is answered 'N': this leg stays inside the host). */
async function clientStartup(client: Socket): Promise<Buffer> {
  let buffered = Buffer.alloc(0);
  for (;;) {
    while (buffered.length < 8) buffered = Buffer.concat([buffered, await nextChunk(client)]);
    const code = buffered.readInt32BE(4);
    if (buffered.readInt32BE(0) !== 8 || (code !== SSL_REQUEST && code !== GSSENC_REQUEST)) return buffered;
    client.write("N");
    buffered = buffered.subarray(8);
  }
}

/** A connection to the tenant server, TLS negotiated as `sslMode` says. */
async function databaseUpstream(dest: NonNullable<RelayDestinations["database"]>): Promise<Socket> {
  const socket = await connected(net.connect(dest.port, dest.host));
  if (dest.sslMode === "disable") return socket;
  const request = Buffer.alloc(8);
  request.writeInt32BE(8, 0);
  request.writeInt32BE(SSL_REQUEST, 4);
  socket.write(request);
  const answer = await nextChunk(socket);
  if (answer[0] !== 0x53 /* S */) {
    if (dest.sslMode === "prefer") return socket;
    socket.destroy();
    throw new Error("the tenant server does not offer TLS");
  }
  const verify = dest.sslMode === "verify-full";
  const servername = net.isIP(dest.host) ? undefined : dest.host;
  return connected(tls.connect({ socket, host: dest.host, servername, ca: dest.ca, rejectUnauthorized: verify }), "secureConnect");
}

async function platformUpstream(dest: NonNullable<RelayDestinations["platform"]>): Promise<Socket> {
  if (!dest.tls) return connected(net.connect(dest.port, dest.host));
  const servername = net.isIP(dest.host) ? undefined : dest.host;
  return connected(tls.connect({ host: dest.host, port: dest.port, servername }), "secureConnect");
}

/** Both ways until either side ends; an error on one side closes both. */
function splice(a: Socket, b: Socket): void {
  const end = () => (a.destroy(), b.destroy());
  a.on("error", end).on("close", () => b.writableEnded || b.end());
  b.on("error", end).on("close", () => a.writableEnded || a.end());
  a.setNoDelay(true);
  b.setNoDelay(true);
  a.pipe(b);
  b.pipe(a);
  a.resume();
}

export class JobRelay {
  private readonly servers: Server[] = [];
  private readonly names: string[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(readonly dir: string) {}

  /**
   * The relay of one job: `dir` (made here, 0700, owned by `owner` when the node is root) with a
   * socket per configured destination. Its sockets accept only the job's own user (and root).
   */
  static async open(dir: string, destinations: RelayDestinations, owner?: { uid: number; gid: number }): Promise<JobRelay> {
    await fs.mkdir(path.dirname(dir), { recursive: true, mode: 0o711 });
    // Reused, not replaced: a container adopted after a node restart has this very folder bound.
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.chmod(dir, 0o700);
    await Promise.all([PLATFORM_SOCKET, DATABASE_SOCKET].map((name) => fs.rm(path.join(dir, name), { force: true })));
    const relay = new JobRelay(dir);
    try {
      const { platform, database } = destinations;
      if (platform) await relay.listen(PLATFORM_SOCKET, () => platformUpstream(platform));
      if (database)
        await relay.listen(DATABASE_SOCKET, async (client) => {
          const first = await clientStartup(client);
          const upstream = await databaseUpstream(database);
          upstream.write(first);
          return upstream;
        });
      if (owner) for (const entry of [".", ...relay.names]) await fs.chown(path.join(dir, entry), owner.uid, owner.gid);
    } catch (err) {
      await relay.close();
      throw err;
    }
    return relay;
  }

  private track(socket: Socket): Socket {
    this.sockets.add(socket);
    return socket.once("close", () => this.sockets.delete(socket));
  }

  /** Serves `name`: each client piped to the upstream `connect` opens for it (none: the client is closed). */
  private async listen(name: string, connect: (client: Socket) => Promise<Socket>): Promise<void> {
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (client) => {
      this.track(client).on("error", () => client.destroy());
      connect(client).then(
        (upstream) => (client.destroyed ? upstream.destroy() : splice(client, this.track(upstream))),
        () => client.destroy(),
      );
    });
    server.maxConnections = RELAY_MAX_CONNECTIONS;
    this.servers.push(server);
    this.names.push(name);
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(path.join(this.dir, name), resolve));
    await fs.chmod(path.join(this.dir, name), 0o600);
  }

  /**
   * The node lets go of the job (it stops; the container goes on, and the node that adopts it opens
   * the relay again in this folder): stops listening and cuts every connection still open.
   */
  async letGo(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  /** The job ended: as letGo, and the folder is removed. */
  async close(): Promise<void> {
    await this.letGo();
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}
