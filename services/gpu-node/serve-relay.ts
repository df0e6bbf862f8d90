/**
 * The inbound relay of a model deployment's replica (issue 29): the platform's HTTP requests
 * reach the port the replica serves on inside its sandbox or container, which has no network.
 * The node gives the job a folder of its own, bound writable at SERVE_MOUNT; the job's forwarder
 * (relay-forwarder.ts, an inbound route) listens on a unix socket there and pipes each connection
 * to the job's 127.0.0.1:<servePort>. The node connects to that socket from outside when the
 * platform asks it to (`gpu-node.serve`, over the authenticated bus, callers: inference): no port
 * is opened on any network, and the job still reaches nothing.
 */
import { promises as fs } from "fs";
import net, { Socket } from "net";
import path from "path";
import type { Readable } from "stream";
import { fromWire, SERVE_WIRE } from "../../lib/deployment-protocol";
import { JOB_ID_PATTERN, JobError } from "./job";
import type { ForwardRoute } from "./relay-forwarder";
import { CoalescedAnswer, servePacer } from "./serve-pacing";

/** Where the replica's serve folder appears inside its job. */
export const SERVE_MOUNT = "/run/ci-platform-serve";
export const SERVE_SOCKET = "serve.sock";

/** The serve folder of `jobId` under the node's relay folder (GPU_RELAY_DIR). */
export const serveDir = (relayDir: string, jobId: string) => path.join(relayDir, "serve", jobId);

/** The unix socket the replica's forwarder listens on, as the node sees it. */
export const serveSocketPath = (relayDir: string, jobId: string) => path.join(serveDir(relayDir, jobId), SERVE_SOCKET);

/** A replica's serve folder while it runs: the forwarder's route, and its removal. */
export type ServeSocket = { dir: string; route: ForwardRoute; close(): Promise<void> };

/** Makes the job's serve folder (0700, owned by `owner` when the node is root); throws JobError with a readable reason. */
export async function openServeSocket(relayDir: string, jobId: string, port: number, owner?: { uid: number; gid: number }): Promise<ServeSocket> {
  const dir = serveDir(relayDir, jobId);
  try {
    await fs.mkdir(path.dirname(dir), { recursive: true, mode: 0o711 });
    await fs.rm(dir, { recursive: true, force: true });
    await fs.mkdir(dir, { mode: 0o700 });
    if (owner) await fs.chown(dir, owner.uid, owner.gid);
  } catch (err) {
    throw new JobError(`The replica's serve folder could not be made: ${(err as Error).message}`);
  }
  return {
    dir,
    route: { port, socket: path.posix.join(SERVE_MOUNT, SERVE_SOCKET), inbound: true },
    close: () => fs.rm(dir, { recursive: true, force: true }),
  };
}

/**
 * One connection to a replica's port: `request`'s bytes are written to it (an object-mode request
 * is the latin1 wire, decoded chunk by chunk), and what the replica answers is the returned stream. Rejects when this node runs no such replica (or it does not
 * listen yet). Ending or destroying either side closes the connection.
 */
export async function connectServe(relayDir: string, jobId: string, request: Readable): Promise<Socket> {
  // The request is listened to from the start, and destroyed on failure: Moleculer destroys a
  // request stream with an error when its caller's process leaves, whenever that comes.
  if (!JOB_ID_PATTERN.test(jobId)) {
    request.on("error", () => undefined).destroy();
    throw new JobError("No such replica on this node");
  }
  const socket = net.connect({ path: serveSocketPath(relayDir, jobId), allowHalfOpen: true });
  request.on("error", () => socket.destroy());
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject)).catch(() => {
    socket.destroy();
    request.destroy();
    throw new JobError("The replica does not answer on this node");
  });
  socket.setNoDelay(true);
  socket.on("close", () => request.destroy());
  pump(request, socket);
  return socket;
}

/**
 * Writes the request's chunks to the replica's connection as they come, each decoded from the
 * latin1 wire when the request is in object mode (lib/deployment-protocol.ts; a chunk that is not
 * fails the request): one write per chunk, with no stream between them. The request pauses while
 * the connection's buffer is full, and its end ends the connection's writing side.
 */
function pump(request: Readable, socket: Socket): void {
  const decode = request.readableObjectMode;
  request.on("data", (chunk: unknown) => {
    let bytes: Buffer;
    try {
      bytes = decode ? fromWire(chunk) : (chunk as Buffer);
    } catch (err) {
      return void request.destroy(err as Error);
    }
    if (!socket.write(bytes)) request.pause();
  });
  socket.on("drain", () => request.resume());
  request.once("end", () => socket.end());
}

/**
 * connectServe's answer as the `gpu-node.serve` action returns it: coalesced at the node's pace
 * (serve-pacing.ts), so what the replica writes never goes over this node's RES budget on the bus,
 * and on the latin1 wire when the caller asks for it (`wire`, lib/deployment-protocol.ts). The
 * request is read in either wire. Destroying the answer closes the connection, and a connection
 * that fails fails the answer.
 */
export async function serveAnswer(relayDir: string, jobId: string, request: Readable, wire?: string): Promise<Readable> {
  const socket = await connectServe(relayDir, jobId, request);
  const answer = new CoalescedAnswer(servePacer, wire === SERVE_WIRE);
  socket.once("error", (err) => answer.destroy(err));
  answer.once("close", () => socket.destroy());
  return socket.pipe(answer);
}
