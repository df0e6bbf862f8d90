/**
 * A job's artifacts: what it left under /out, kept on the node as one tar per job
 * (`GPU_JOB_LOG_DIR/artifacts/<jobId>.tar`, beside the logs and pruned with them) and served page
 * by page like a log. The Docker executor stores the engine's archive of /out; the process
 * executor packs the job's /out folder itself (packFolder). Either way the archive is bounded
 * (GPU_JOB_OUT_MAX_MB): one that would be larger is not kept, and the job's log says so.
 */
import { constants as fsConstants, createWriteStream, promises as fs } from "fs";
import path from "path";
import type { Readable } from "stream";
import { pipeline } from "stream/promises";
import { Transform } from "stream";
import type { JobLimits } from "./job";
import type { OutputCapture } from "./output";

/** Where the node keeps artifacts: a folder of its own beside the log files. */
export const artifactsDir = (logDir: string): string => path.join(logDir, "artifacts");
export const artifactPath = (logDir: string, jobId: string): string => path.join(artifactsDir(logDir), `${jobId}.tar`);

/** The top folder of every archive: entries read `out/…`, as Docker's archive of /out does. */
export const OUT_ROOT = "out";

export type StoreResult = "kept" | "empty" | "over-limit";

const BLOCK = 512;

class OverLimit extends Error {}

/** A tar entry's header (ustar; a PAX record first for names over 100 bytes). */
function header(name: string, type: "0" | "5" | "x", size: number, mode: number, mtimeS: number): Buffer {
  const block = Buffer.alloc(BLOCK);
  const field = (value: string, at: number, length: number) => block.write(value, at, length, "utf8");
  const octal = (value: number, at: number, length: number) => field(value.toString(8).padStart(length - 1, "0"), at, length - 1);
  field(Buffer.byteLength(name) <= 100 ? name : "././@PaxHeader", 0, 100);
  octal(mode & 0o7777, 100, 8);
  octal(0, 108, 8);
  octal(0, 116, 8);
  octal(size, 124, 12);
  octal(Math.max(0, Math.floor(mtimeS)), 136, 12);
  field(" ".repeat(8), 148, 8);
  field(type, 156, 1);
  field("ustar\u000000", 257, 8);
  let sum = 0;
  for (const byte of block) sum += byte;
  octal(sum, 148, 7);
  return block;
}

/** The header(s) of one entry: a PAX `path` record when the name does not fit ustar's 100 bytes. */
function entryHeaders(name: string, type: "0" | "5", size: number, mode: number, mtimeS: number): Buffer[] {
  if (Buffer.byteLength(name) <= 100) return [header(name, type, size, mode, mtimeS)];
  const rest = ` path=${name}\n`;
  const base = Buffer.byteLength(rest);
  // The record's length counts its own digits.
  let length = base + String(base).length;
  if (String(length).length !== String(base).length) length = base + String(length).length;
  const body = Buffer.from(`${length}${rest}`);
  return [header("pax", "x", body.length, 0o644, mtimeS), padded(body), header(name.slice(0, 100), type, size, mode, mtimeS)];
}

const padded = (data: Buffer): Buffer => Buffer.concat([data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK)]);

/**
 * Packs `folder` into a tar at `dest` (entries `out/…`): regular files and folders only, never
 * following a symlink (a link the job made to a host file is left out, not read), and never
 * more than `maxBytes` in all. Files are opened with O_NOFOLLOW and checked again once open.
 */
export async function packFolder(folder: string, dest: string, maxBytes: number): Promise<StoreResult> {
  // Most jobs leave nothing: one readdir, no archive opened, written and removed.
  if (!(await fs.readdir(folder).catch(() => [] as string[])).length) return "empty";
  await fs.mkdir(path.dirname(dest), { recursive: true });
  const out = await fs.open(dest, "w", 0o600);
  let written = 0;
  let entries = 0;
  const write = async (data: Buffer) => {
    if (written + data.length > maxBytes) throw new OverLimit();
    await out.write(data);
    written += data.length;
  };
  const walk = async (dir: string, name: string): Promise<void> => {
    for (const child of (await fs.readdir(dir).catch(() => [] as string[])).sort()) {
      const full = path.join(dir, child);
      const entry = `${name}/${child}`;
      const stat = await fs.lstat(full).catch(() => null);
      if (stat?.isDirectory()) {
        for (const h of entryHeaders(`${entry}/`, "5", 0, stat.mode, stat.mtimeMs / 1000)) await write(h);
        entries++;
        await walk(full, entry);
      } else if (stat?.isFile()) {
        await packFile(full, entry);
      }
    }
  };
  const packFile = async (full: string, entry: string) => {
    const file = await fs.open(full, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK).catch(() => null);
    if (!file) return;
    try {
      const stat = await file.stat();
      if (!stat.isFile()) return;
      if (written + BLOCK + stat.size > maxBytes) throw new OverLimit();
      for (const h of entryHeaders(entry, "0", stat.size, stat.mode, stat.mtimeMs / 1000)) await write(h);
      const chunk = Buffer.alloc(Math.min(stat.size, 1024 * 1024) || 1);
      let left = stat.size;
      while (left > 0) {
        const { bytesRead } = await file.read(chunk, 0, Math.min(chunk.length, left), null);
        if (bytesRead === 0) break;
        await write(chunk.subarray(0, bytesRead));
        left -= bytesRead;
      }
      await write(Buffer.alloc(left + ((BLOCK - (stat.size % BLOCK)) % BLOCK))); // a file that shrank: zeros
      entries++;
    } finally {
      await file.close();
    }
  };
  try {
    for (const h of entryHeaders(`${OUT_ROOT}/`, "5", 0, 0o755, Date.now() / 1000)) await write(h);
    await walk(folder, OUT_ROOT);
    await write(Buffer.alloc(2 * BLOCK));
  } catch (err) {
    await out.close();
    await fs.rm(dest, { force: true });
    if (err instanceof OverLimit) return "over-limit";
    throw err;
  }
  await out.close();
  if (entries === 0) await fs.rm(dest, { force: true });
  return entries ? "kept" : "empty";
}

/**
 * The modification time a prepared /out gets. Only its owner (root) may set a time of its choosing,
 * and any entry made or removed in it moves the time to now: still this, /out is untouched.
 */
export const PREPARED_OUT_MTIME_S = 86400;

/** A tar of the empty, world-writable (sticky, as /tmp) `out/` folder: extracted at /, what a fresh /out volume gets. */
export const preparedOutTar = (): Buffer => Buffer.concat([...entryHeaders(`${OUT_ROOT}/`, "5", 0, 0o1777, PREPARED_OUT_MTIME_S), Buffer.alloc(2 * BLOCK)]);

/** The entry names of a tar file (headers only; PAX and GNU long names read as such). */
export async function tarEntryNames(file: string): Promise<string[]> {
  const handle = await fs.open(file, "r");
  const names: string[] = [];
  try {
    const block = Buffer.alloc(BLOCK);
    let offset = 0;
    let longName: string | undefined;
    for (;;) {
      const { bytesRead } = await handle.read(block, 0, BLOCK, offset);
      if (bytesRead < BLOCK || block.every((b) => b === 0)) break;
      const text = (at: number, length: number) => block.toString("utf8", at, at + length).replace(/\0.*$/s, "");
      const size = parseInt(text(124, 12).trim() || "0", 8);
      const type = text(156, 1);
      const body = Buffer.alloc(size);
      if (type === "x" || type === "L") await handle.read(body, 0, size, offset + BLOCK);
      if (type === "x") longName = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString("utf8"))?.[1] ?? longName;
      else if (type === "L") longName = body.toString("utf8").replace(/\0.*$/s, "");
      else if (type !== "g") {
        const prefix = text(257, 6).startsWith("ustar") ? text(345, 155) : "";
        names.push(longName ?? (prefix ? `${prefix}/${text(0, 100)}` : text(0, 100)));
        longName = undefined;
      }
      offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    }
  } finally {
    await handle.close();
  }
  return names;
}

/**
 * Stores an archive of /out (Docker's) as the job's artifacts: at most `maxBytes`, and only when
 * it holds more than the empty /out folder itself.
 */
export async function storeArchive(archive: Readable, dest: string, maxBytes: number): Promise<StoreResult> {
  await fs.mkdir(path.dirname(dest), { recursive: true });
  const partial = `${dest}.partial`;
  let bytes = 0;
  const bounded = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      callback(bytes > maxBytes ? new OverLimit() : null, chunk);
    },
  });
  try {
    await pipeline(archive, bounded, createWriteStream(partial, { mode: 0o600 }));
  } catch (err) {
    await fs.rm(partial, { force: true });
    if (err instanceof OverLimit) return "over-limit";
    throw err;
  }
  const names = await tarEntryNames(partial).catch(() => [] as string[]);
  if (!names.some((name) => name.replace(/\/+$/, "") !== OUT_ROOT)) {
    await fs.rm(partial, { force: true });
    return "empty";
  }
  await fs.rename(partial, dest);
  return "kept";
}

/** The log's line for an archive over the limit. */
export const overLimitNote = (maxBytes: number): string =>
  `the job's /out held more than ${Math.round(maxBytes / (1024 * 1024))} MiB (the node's limit, GPU_JOB_OUT_MAX_MB): its artifacts were not kept`;

/**
 * Keeps a job's artifacts as the executor stores them (`store`: Docker's archive, or the packed
 * folder; undefined when there is nothing to read), within GPU_JOB_OUT_MAX_MB: over it, the job's
 * log says so. Never throws: a job's outcome does not depend on its artifacts.
 */
export async function keepArtifacts(
  jobId: string,
  limits: JobLimits,
  output: OutputCapture | undefined,
  store: (dest: string, maxBytes: number) => Promise<StoreResult | undefined>,
): Promise<void> {
  const maxBytes = limits.outMaxBytes ?? Infinity;
  try {
    if ((await store(artifactPath(limits.logDir, jobId), maxBytes)) === "over-limit") output?.note(overLimitNote(maxBytes));
  } catch (err) {
    limits.log?.(`Artifacts of job ${jobId} not kept`, err);
  }
}
