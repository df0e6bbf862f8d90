/**
 * Output capture: a job's stdout+stderr goes, in arrival order, to a log file on the node (the
 * whole output up to the operator's cap, served page by page by `gpu-node.logs`) and to a rolling
 * in-memory tail (the true last OUTPUT_TAIL_BYTES, sent in the job's terminal event).
 */
import { createWriteStream, mkdirSync, openSync, promises as fs, utimesSync, WriteStream } from "fs";
import path from "path";
import { OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";
import { EncodedOutput, encodeOutput } from "../../lib/output-encoding";

/** Default cap of one job's log file (GPU_JOB_OUTPUT_MAX_MB). */
const LOG_FILE_MAX_BYTES = 64 * 1024 * 1024;

/** Index of the first byte at or after `start` that does not continue a UTF-8 character. */
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

/** The last `limit` bytes seen (a rolling window over everything pushed). */
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

  /** The window's bytes, without a character cut in two at its start. */
  bytes(): Buffer {
    this.compact();
    const buf = this.chunks[0] ?? Buffer.alloc(0);
    return buf.subarray(this.dropped ? utf8Start(buf, 0) : 0);
  }

  text(): string {
    return this.bytes().toString("utf8");
  }
}

/** What names an attempt's log file: the job id for its first attempt, `<jobId>.<attempt>` for a retry. */
export const logKey = (jobId: string, attempt = 1): string => (attempt > 1 ? `${jobId}.${attempt}` : jobId);

/** `key`: logKey (a job id names its first attempt's log). */
export function logFilePath(dir: string, key: string): string {
  return path.join(dir, `${key}.log`);
}

/** The line that ends a capped log and heads a capped result. */
export function truncationNote(keptBytes: number, omittedBytes: number): string {
  return `[ci-platform: output truncated: ${omittedBytes} bytes omitted after the first ${keptBytes} bytes (the node's cap, GPU_JOB_OUTPUT_MAX_MB); the job result holds the last ${OUTPUT_TAIL_BYTES} bytes]`;
}

export type CaptureOptions = { maxFileBytes?: number; tailBytes?: number; resume?: boolean };

/** Where one job's output goes. `append` never throws: a full disk must not kill the job. */
export class OutputCapture {
  private readonly tail: TailBuffer;
  private written = 0;
  private omitted = 0;
  private failed = false;
  /** When the log was last written before this capture (a resumed log: the node's last write). */
  lastWriteMs = Date.now();
  /** When output last arrived (stamped on the file at close: the kernel's mtime is coarser). */
  private lastAppendMs = Date.now();
  private closed?: Promise<void>;

  private constructor(
    private readonly filePath: string,
    private readonly file: WriteStream,
    private readonly maxFileBytes: number,
    tailBytes: number,
  ) {
    this.tail = new TailBuffer(tailBytes);
    file.on("error", () => (this.failed = true));
  }

  /**
   * Opens the job's log file: truncated for a new job; with `resume` (a job adopted after a node
   * restart) appended to, its cap and tail carried on from what the file already holds.
   */
  static async open(dir: string, jobId: string, opts: CaptureOptions = {}): Promise<OutputCapture> {
    const file = logFilePath(dir, jobId);
    const previous = opts.resume ? await readTail(file, opts.tailBytes ?? OUTPUT_TAIL_BYTES) : null;
    // Opened synchronously, on the launch's critical path: a local file's open takes microseconds,
    // an asynchronous one a trip through libuv's thread pool and back, 0.15 to over 1 ms when its
    // threads were asleep (an idle node). The writes stay asynchronous.
    const openLog = () => createWriteStream(file, { fd: openSync(file, opts.resume ? "a" : "w", 0o600) });
    let stream: WriteStream;
    try {
      stream = openLog();
    } catch (err) {
      // The folder exists but for the node's first job (or after someone removed it): made only then.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      stream = openLog();
    }
    const capture = new OutputCapture(file, stream, opts.maxFileBytes ?? LOG_FILE_MAX_BYTES, opts.tailBytes ?? OUTPUT_TAIL_BYTES);
    if (previous) {
      capture.written = previous.size;
      capture.tail.push(previous.tail);
      capture.lastWriteMs = previous.mtimeMs;
    }
    return capture;
  }

  append(chunk: Buffer): void {
    if (chunk.length === 0 || this.closed) return;
    this.lastAppendMs = Date.now();
    this.tail.push(chunk);
    const room = Math.max(0, this.maxFileBytes - this.written);
    const kept = Math.min(room, chunk.length);
    if (kept > 0 && !this.failed) this.file.write(kept === chunk.length ? chunk : chunk.subarray(0, kept));
    this.written += kept;
    this.omitted += chunk.length - kept;
  }

  /**
   * The log file is behind (a job printing faster than the disk writes): the source should pause
   * until `whenDrained`, so a node holds a bounded buffer per job and the job waits, as in a pipe.
   */
  get congested(): boolean {
    return !this.failed && !this.file.destroyed && this.file.writableNeedDrain;
  }

  /** Calls `resume` once the log file has caught up (or can no longer be written). */
  whenDrained(resume: () => void): void {
    if (!this.congested) return resume();
    const done = () => {
      this.file.off("drain", done);
      this.file.off("close", done);
      resume();
    };
    this.file.once("drain", done);
    this.file.once("close", done);
  }

  /** A line of the platform's own in the log (e.g. a gap after a node restart); not in the tail. */
  /** Whether the output captured so far ends with `bytes` (within the kept tail). */
  endsWith(bytes: Buffer): boolean {
    const tail = this.tail.bytes();
    return bytes.length <= tail.length && tail.subarray(tail.length - bytes.length).equals(bytes);
  }

  note(text: string): void {
    if (this.closed || this.failed) return;
    this.file.write(`\n[ci-platform: ${text}]\n`);
  }

  /** Bytes the cap kept out of the log file. */
  get omittedBytes(): number {
    return this.omitted;
  }

  tailText(): string {
    return this.tail.text();
  }

  /** The job result's output: the true tail, headed by the truncation note when the log was capped. */
  result(): EncodedOutput {
    const tail = this.tail.bytes();
    if (!this.omitted) return encodeOutput(tail);
    return encodeOutput(Buffer.concat([Buffer.from(`${truncationNote(this.written, this.omitted)}\n`), tail]));
  }

  /**
   * Ends the log (with the truncation note when capped), flushes and closes it (idempotent). The
   * file's mtime becomes the exact time of the last output: an adopting node recovers what the
   * job printed after it from the engine's log (docker-executor.ts).
   */
  close(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => {
      if (this.file.destroyed) return resolve();
      if (this.omitted && !this.failed) this.file.write(`\n${truncationNote(this.written, this.omitted)}\n`);
      this.file.once("error", () => resolve());
      this.file.end(() => resolve());
    }).then(() => {
      try {
        utimesSync(this.filePath, new Date(), new Date(this.lastAppendMs)); // microseconds; no thread-pool trip
      } catch {
        // the file is gone (removed by the node's log cap): nothing to date
      }
    });
    return this.closed;
  }
}

async function readTail(file: string, limit: number): Promise<{ size: number; mtimeMs: number; tail: Buffer } | null> {
  const handle = await fs.open(file, "r").catch(() => null);
  if (!handle) return null;
  try {
    const { size, mtimeMs } = await handle.stat();
    const buf = Buffer.alloc(Math.min(limit, size));
    const { bytesRead } = await handle.read(buf, 0, buf.length, size - buf.length);
    return { size, mtimeMs, tail: buf.subarray(0, bytesRead) };
  } finally {
    await handle.close();
  }
}

/**
 * Splits Docker's multiplexed (non-TTY) stream into payloads in arrival order. Each frame is an
 * 8-byte header (stream type, 3 zero bytes, big-endian length) and its payload; frames may
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
