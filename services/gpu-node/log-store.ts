/**
 * The node's job log files: reading them page by page (a bus message must stay small) and
 * keeping their total bounded (7 days at most, and at most GPU_JOB_LOG_MAX_TOTAL_MB on the node,
 * oldest finished jobs' logs first).
 */
import { promises as fs } from "fs";
import path from "path";
import type { LogsPage } from "../../lib/gpu-protocol";
import { logFilePath, utf8End } from "./output";
import { artifactPath, artifactsDir } from "./artifacts";

/** `gpu-node.logs` returns at most this many bytes per call (base64 on the bus: ~350 KB). */
export const LOGS_PAGE_BYTES = 256 * 1024;

type ByteWindow = { bytes: Buffer; offset: number; totalBytes: number };

async function readWindow(file: string, offset: number, limit: number): Promise<ByteWindow | null> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const start = Math.min(offset, size);
    const buf = Buffer.alloc(Math.min(limit, size - start));
    const { bytesRead } = await handle.read(buf, 0, buf.length, start);
    return { bytes: buf.subarray(0, bytesRead), offset: start, totalBytes: size };
  } finally {
    await handle.close();
  }
}

/** A page of a job's log as raw bytes (base64), for the bus. null when the node has no log. */
export const readLogChunk = (dir: string, jobId: string, offset = 0, limit = LOGS_PAGE_BYTES): Promise<LogsPage | null> =>
  readFileChunk(logFilePath(dir, jobId), offset, limit);

/** A page of one of the node's job files (a log, an artifacts tar) as raw bytes (base64). null when there is no such file. */
export async function readFileChunk(file: string, offset = 0, limit = LOGS_PAGE_BYTES): Promise<LogsPage | null> {
  const w = await readWindow(file, offset, limit);
  if (!w) return null;
  const next = w.offset + w.bytes.length;
  return { data: w.bytes.toString("base64"), offset: w.offset, nextOffset: next < w.totalBytes ? next : null, totalBytes: w.totalBytes };
}

export type LogTextPage = { text: string; offset: number; nextOffset: number | null; totalBytes: number };

/** A page of a job's log as text, cut on UTF-8 character boundaries (operators, tests). */
export async function readLogPage(dir: string, jobId: string, offset = 0, limit = LOGS_PAGE_BYTES): Promise<LogTextPage | null> {
  const w = await readWindow(logFilePath(dir, jobId), offset, limit);
  if (!w) return null;
  const end = w.offset + w.bytes.length < w.totalBytes ? utf8End(w.bytes, w.bytes.length) : w.bytes.length;
  const next = w.offset + end;
  return { text: w.bytes.subarray(0, end).toString("utf8"), offset: w.offset, nextOffset: next < w.totalBytes ? next : null, totalBytes: w.totalBytes };
}

export type LogFile = { jobId: string; bytes: number; mtimeMs: number };

/**
 * Which logs to remove (pure): those older than `maxAgeMs`, then the oldest until the rest fit in
 * `maxTotalBytes`. Logs of jobs still running (`active`) are never chosen.
 */
export function logsToPrune(files: LogFile[], opts: { maxAgeMs: number; maxTotalBytes: number; now: number; active: Set<string> }): string[] {
  const removed: string[] = [];
  const kept: LogFile[] = [];
  for (const f of files) {
    if (!opts.active.has(f.jobId) && opts.now - f.mtimeMs > opts.maxAgeMs) removed.push(f.jobId);
    else kept.push(f);
  }
  let total = kept.reduce((sum, f) => sum + f.bytes, 0);
  for (const f of [...kept].sort((a, b) => a.mtimeMs - b.mtimeMs)) {
    if (total <= opts.maxTotalBytes) break;
    if (opts.active.has(f.jobId)) continue;
    removed.push(f.jobId);
    total -= f.bytes;
  }
  return removed;
}

/** Removes what `logsToPrune` chooses; returns the job ids whose logs went and the bytes kept. */
export async function pruneLogs(
  dir: string,
  opts: { maxAgeMs: number; maxTotalBytes: number; active?: Set<string>; now?: number },
): Promise<{ removed: string[]; keptBytes: number }> {
  const byJob = new Map<string, LogFile>();
  // A job's artifacts count with its log and go with it ("kept as long as the logs").
  for (const [folder, suffix] of [
    [dir, ".log"],
    [artifactsDir(dir), ".tar"],
  ]) {
    for (const name of await fs.readdir(folder).catch(() => [] as string[])) {
      if (!name.endsWith(suffix)) continue;
      const stat = await fs.stat(path.join(folder, name)).catch(() => null);
      if (!stat?.isFile()) continue;
      const jobId = name.slice(0, -suffix.length);
      const known = byJob.get(jobId);
      byJob.set(jobId, { jobId, bytes: (known?.bytes ?? 0) + stat.size, mtimeMs: Math.max(known?.mtimeMs ?? 0, stat.mtimeMs) });
    }
  }
  const files = [...byJob.values()];
  const chosen = logsToPrune(files, {
    maxAgeMs: opts.maxAgeMs,
    maxTotalBytes: opts.maxTotalBytes,
    now: opts.now ?? Date.now(),
    active: opts.active ?? new Set(),
  });
  for (const jobId of chosen) {
    await fs.rm(logFilePath(dir, jobId), { force: true });
    await fs.rm(artifactPath(dir, jobId), { force: true });
  }
  const gone = new Set(chosen);
  return { removed: chosen, keptBytes: files.filter((f) => !gone.has(f.jobId)).reduce((sum, f) => sum + f.bytes, 0) };
}

/**
 * When a finished job's log calls for a prune. Scanning the folder after every job costs
 * O(logs kept) per job (quadratic over a week of jobs), so the node keeps a running total from
 * the last scan and scans again only once it crosses the cap (retention: the hourly prune).
 */
export class LogBudget {
  private total: number | null = null;
  constructor(private readonly maxTotalBytes: number) {}
  /** What the last prune kept. */
  scanned(keptBytes: number): void {
    this.total = keptBytes;
  }
  /** Adds a finished log; true when a prune is due (over the cap, or no scan yet). */
  add(bytes: number): boolean {
    if (this.total === null) return true;
    this.total += bytes;
    return this.total > this.maxTotalBytes;
  }
}
