/**
 * Output capture: a job's stdout+stderr goes, in arrival order, to a log file on the node (the
 * whole output, up to a cap, served by `gpu-node.logs`) and to an in-memory tail (the last
 * OUTPUT_TAIL_BYTES, sent in the job's terminal event).
 */
import { createWriteStream, promises as fs, WriteStream } from "fs";
import path from "path";
import { LogsPage, OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";

/** A log file stops growing here; the tail in the job result still shows how the job ended. */
export const LOG_FILE_MAX_BYTES = 64 * 1024 * 1024;
/** `gpu-node.logs` returns at most this much per call (a bus message must stay well under 1 MB). */
export const LOGS_PAGE_BYTES = 256 * 1024;

/** Drops a partial UTF-8 character at the start of a byte window. */
function utf8Start(buf: Buffer, start: number): number {
  let i = start;
  while (i < buf.length && i - start < 3 && (buf[i] & 0xc0) === 0x80) i++;
  return i;
}

/** Backs `end` off a UTF-8 character that the window `[0, end)` would cut in two. */
export function utf8End(buf: Buffer, end: number): number {
  let lead = end - 1;
  while (lead >= 0 && end - lead <= 3 && (buf[lead] & 0xc0) === 0x80) lead--;
  if (lead < 0) return end;
  const byte = buf[lead];
  const size = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
  return lead + size <= end ? end : lead;
}

/** The last `limit` bytes seen, decoded without a broken leading character. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  private dropped = false;

  constructor(private readonly limit = OUTPUT_TAIL_BYTES) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    // Compact only once twice the limit is held, so a stream of small chunks stays cheap.
    if (this.size > 2 * this.limit) this.compact();
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const kept = all.subarray(Math.max(0, all.length - this.limit));
    if (kept.length < all.length) this.dropped = true;
    this.chunks = [Buffer.from(kept)];
    this.size = kept.length;
  }

  text(): string {
    this.compact();
    const buf = this.chunks[0] ?? Buffer.alloc(0);
    return buf.subarray(this.dropped ? utf8Start(buf, 0) : 0).toString("utf8");
  }
}

export function logFilePath(dir: string, jobId: string): string {
  return path.join(dir, `${jobId}.log`);
}

/** Where one job's output goes. `append` never throws: a full disk must not kill the job. */
export class OutputCapture {
  private readonly tail: TailBuffer;
  private written = 0;
  private capped = false;
  private closed?: Promise<void>;

  private constructor(
    private readonly file: WriteStream,
    private readonly maxFileBytes: number,
    tailBytes: number,
  ) {
    this.tail = new TailBuffer(tailBytes);
    file.on("error", () => (this.capped = true));
  }

  /** Opens (truncating) the job's log file. */
  static async open(dir: string, jobId: string, opts: { maxFileBytes?: number; tailBytes?: number } = {}): Promise<OutputCapture> {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const file = createWriteStream(logFilePath(dir, jobId), { flags: "w", mode: 0o600 });
    await new Promise<void>((resolve, reject) => file.once("open", () => resolve()).once("error", reject));
    return new OutputCapture(file, opts.maxFileBytes ?? LOG_FILE_MAX_BYTES, opts.tailBytes ?? OUTPUT_TAIL_BYTES);
  }

  append(chunk: Buffer): void {
    if (chunk.length === 0 || this.closed) return;
    this.tail.push(chunk);
    if (this.capped) return;
    const room = this.maxFileBytes - this.written;
    if (chunk.length <= room) {
      this.file.write(chunk);
      this.written += chunk.length;
      return;
    }
    this.file.write(chunk.subarray(0, room));
    this.file.write(`\n[ci-platform: the log stops here at ${this.maxFileBytes} bytes; the job result holds the last ${OUTPUT_TAIL_BYTES} bytes]\n`);
    this.written = this.maxFileBytes;
    this.capped = true;
  }

  tailText(): string {
    return this.tail.text();
  }

  /** Flushes and closes the file (idempotent). */
  close(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => {
      if (this.file.destroyed) return resolve();
      this.file.end(() => resolve());
      this.file.once("error", () => resolve());
    });
    return this.closed;
  }
}

/** Reads a page of a job's log file, cut on UTF-8 character boundaries. null when there is none. */
export async function readLogPage(dir: string, jobId: string, offset = 0, limit = LOGS_PAGE_BYTES): Promise<LogsPage | null> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(logFilePath(dir, jobId), "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const start = Math.min(offset, size);
    const buf = Buffer.alloc(Math.min(limit, size - start));
    const { bytesRead } = await handle.read(buf, 0, buf.length, start);
    const end = start + bytesRead < size ? utf8End(buf, bytesRead) : bytesRead;
    const next = start + end;
    return { text: buf.subarray(0, end).toString("utf8"), offset: start, nextOffset: next < size ? next : null, totalBytes: size };
  } finally {
    await handle.close();
  }
}

/** Removes log files older than `maxAgeMs` (a node keeps logs for a while, not forever). */
export async function pruneLogs(dir: string, maxAgeMs: number, now = Date.now()): Promise<number> {
  let removed = 0;
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.endsWith(".log")) continue;
    const file = path.join(dir, name);
    const stat = await fs.stat(file).catch(() => null);
    if (stat && now - stat.mtimeMs > maxAgeMs) {
      await fs.rm(file, { force: true });
      removed++;
    }
  }
  return removed;
}

/**
 * Splits Docker's multiplexed (non-TTY) log stream into payloads in arrival order. Each frame is
 * an 8-byte header (stream type, 3 zero bytes, big-endian length) and its payload; frames may
 * arrive split across or joined within chunks.
 */
export class DockerFrameDemuxer {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly onPayload: (payload: Buffer, stream: "stdout" | "stderr") => void) {}

  push(chunk: Buffer): void {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (this.pending.length >= 8) {
      const length = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + length) break;
      const stream = this.pending[0] === 2 ? "stderr" : "stdout";
      this.onPayload(this.pending.subarray(8, 8 + length), stream);
      this.pending = this.pending.subarray(8 + length);
    }
  }
}
