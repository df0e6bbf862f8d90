/**
 * What the inference service and gpu-scheduler / gpu-node say to each other about model
 * deployments (issue 29): a deployment's replicas are jobs of its owner (gpu-scheduler's
 * `submitReplica`, `replicas`, `stopReplica`), and the platform's HTTP requests reach a replica
 * through the gpu-node that runs it (`gpu-node.serve`: a byte tunnel to the replica's port).
 */
import type { JobRequest } from "./job-spec";

/** gpu-scheduler.submitReplica: the job (with `deploymentId` and `servePort`) queued for `clientId`. */
export type ReplicaSubmitParams = { clientId: string; job: JobRequest };

/** One replica as gpu-scheduler.replicas lists it: the job's public status and the node it runs on (real id). */
export type ReplicaJob = {
  id: string;
  status: string;
  nodeId: string | null;
  exitCode: number | null;
  errorMessage: string | null;
  /** The end of what it printed (its output is stored once it ended). */
  outputTail: string;
};

/** The action a replica's node answers: the request stream's bytes go to the replica's port, its answer's bytes come back. */
export const SERVE_ACTION = "gpu-node.serve";
/** gpu-node.serve's meta: which job's port, and (`wire`) how the bytes travel both ways. */
export type ServeMeta = { jobId: string; wire?: typeof SERVE_WIRE };

/**
 * The direct serve channel (services/gpu-node/serve-direct.ts, on nodes with GPU_SERVE_LISTEN):
 * `gpu-node.serveTicket` answers where to connect and a ticket for one connection to one job's
 * port: a TLS 1.3 pre-shared key (`key`, 32 random bytes, base64) and its identity (`ticket`). The
 * connection is TLS with that key (SERVE_TLS_CIPHERS), so the node and inference authenticate each
 * other with what only the bus carried, and what passes is encrypted. Inside it the node answers
 * SERVE_DIRECT_ACK once the replica's port is connected, and bytes then pass as they are. A node
 * without the channel answers null, and the bus tunnel is used.
 */
export const SERVE_TICKET_ACTION = "gpu-node.serveTicket";
export type ServeTicket = { address: string; ticket: string; key: string };
/** TLS 1.3 with a pre-shared key (and an ephemeral key exchange: OpenSSL's psk_dhe_ke). */
export const SERVE_TLS_CIPHERS = "TLS_AES_128_GCM_SHA256";
/** What the node sends first inside the connection: the replica's port answered. */
export const SERVE_DIRECT_ACK = "ci-platform-serve 1 ok\n";

/**
 * How a tunnel's bytes may travel on the bus. Its serializer is JSON, which writes a Buffer as an
 * array of numbers (up to 4 characters per byte, each parsed back as a number); on the `latin1`
 * wire each chunk is a string of one character per byte (the streams are in object mode), about
 * 3× cheaper to write and to read. A node that speaks it says so in its `serve` action's schema
 * (`wire: SERVE_WIRE`, in the registry every process has); the caller then asks for it in meta, and
 * both directions use it. Otherwise both send Buffers, as nodes and callers before it do.
 */
export const SERVE_WIRE = "latin1";
/** The most bytes a chunk carries on the latin1 wire (its JSON is at most 6 characters per byte: under NATS's 1 MiB max_payload). */
export const MAX_WIRE_CHUNK = 64 * 1024;

/** `bytes` as latin1-wire chunks (strings of at most MAX_WIRE_CHUNK characters). */
export function toWire(bytes: Buffer): string[] {
  if (bytes.length <= MAX_WIRE_CHUNK) return [bytes.toString("latin1")];
  const chunks: string[] = [];
  for (let at = 0; at < bytes.length; at += MAX_WIRE_CHUNK) chunks.push(bytes.toString("latin1", at, Math.min(bytes.length, at + MAX_WIRE_CHUNK)));
  return chunks;
}

/**
 * A chunk as it arrived from the other side, as bytes: a latin1-wire string, or a Buffer (the
 * Buffer wire). Throws on anything else, or a string over MAX_WIRE_CHUNK: what a peer sends is
 * never decoded beyond that.
 */
export function fromWire(chunk: unknown): Buffer {
  if (typeof chunk === "string") {
    if (chunk.length > MAX_WIRE_CHUNK) throw new Error(`A tunnel chunk over ${MAX_WIRE_CHUNK} bytes`);
    return Buffer.from(chunk, "latin1");
  }
  if (Buffer.isBuffer(chunk)) return chunk;
  throw new Error("A tunnel chunk that is not bytes");
}
