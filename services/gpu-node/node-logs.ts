/**
 * The node's job files as the scheduler reads them: pages of an attempt's log and of a job's
 * artifacts, live follows, and the log folder kept within 7 days and GPU_JOB_LOG_MAX_TOTAL_MB.
 */
import { statSync } from "fs";
import type { LoggerInstance } from "moleculer";
import { apiError } from "../../lib/errors";
import type { FollowPage, FollowParams, LogsPage, LogsParams } from "../../lib/gpu-protocol";
import { artifactPath } from "./artifacts";
import { LogFollowers } from "./log-follow";
import { LogBudget, pruneLogs, readFileChunk, readLogChunk } from "./log-store";
import { logFilePath, logKey } from "./output";

const LOG_RETENTION_MS = 7 * 24 * 3600 * 1000;

export type NodeLogsOptions = {
  logDir: string;
  maxTotalMb: number;
  logger: LoggerInstance;
  /** Which attempt of a job runs on this node now; undefined when none. */
  runningAttempt: (jobId: string) => number | undefined;
  /** The log files of the attempts running now: never pruned. */
  activeLogKeys: () => Set<string>;
};

export class NodeLogs {
  readonly followers = new LogFollowers();
  private readonly budget: LogBudget;

  constructor(private readonly opts: NodeLogsOptions) {
    this.budget = new LogBudget(this.maxTotalBytes);
  }

  private get maxTotalBytes(): number {
    return Math.round(this.opts.maxTotalMb * 1024 * 1024);
  }

  async logs({ jobId, attempt, offset, limit }: LogsParams): Promise<LogsPage> {
    const page = await readLogChunk(this.opts.logDir, logKey(jobId, attempt), offset, limit);
    if (!page) throw apiError("NOT_FOUND", `No output of job ${jobId} (attempt ${attempt ?? 1}) on this node`);
    return page;
  }

  async artifacts({ jobId, offset, limit }: LogsParams): Promise<LogsPage> {
    const page = await readFileChunk(artifactPath(this.opts.logDir, jobId), offset, limit);
    if (!page) throw apiError("NOT_FOUND", `No artifacts of job ${jobId} on this node`);
    return page;
  }

  /** What is there from `offset` now, else (while the attempt runs here) the first bytes written within `waitMs`. */
  async follow(params: FollowParams): Promise<FollowPage> {
    const { jobId, offset, fid, waitMs } = params;
    const attempt = params.attempt ?? 1;
    const key = logKey(jobId, attempt);
    const live = () => (this.opts.runningAttempt(jobId) ?? 0) === attempt;
    const read = async () => (await readLogChunk(this.opts.logDir, key, offset))?.data ?? "";
    let data = await read();
    if (!data && waitMs > 0 && live()) {
      await this.followers.wait(fid, logFilePath(this.opts.logDir, key), offset, waitMs, live);
      data = await read();
    }
    return { data, end: offset + Buffer.byteLength(data, "base64"), live: live() };
  }

  /** Keeps job logs within 7 days and GPU_JOB_LOG_MAX_TOTAL_MB; running jobs' logs stay. */
  async prune(): Promise<void> {
    const result = await pruneLogs(this.opts.logDir, {
      maxAgeMs: LOG_RETENTION_MS,
      maxTotalBytes: this.maxTotalBytes,
      active: this.opts.activeLogKeys(),
    }).catch((err) => {
      this.opts.logger.warn(`Job logs not pruned: ${(err as Error).message}`);
      return null;
    });
    if (!result) return;
    this.budget.scanned(result.keptBytes);
    const removed = result.removed;
    if (removed.length) this.opts.logger.info(`Removed ${removed.length} old job log(s) (retention or GPU_JOB_LOG_MAX_TOTAL_MB)`);
  }

  /** Counts a finished attempt's log (and the job's artifacts) against the node's cap; scans and prunes only when it is crossed. */
  async noteFinished(key: string, jobId: string): Promise<void> {
    // Synchronous: two local stats take microseconds, each asynchronous one a thread-pool trip.
    const sizeOf = (file: string) => {
      try {
        return statSync(file, { throwIfNoEntry: false })?.size ?? 0;
      } catch {
        return 0;
      }
    };
    const size = sizeOf(logFilePath(this.opts.logDir, key)) + sizeOf(artifactPath(this.opts.logDir, jobId));
    if (this.budget.add(size)) await this.prune();
  }
}
