/**
 * A job's whole output for GET /api/gpu/jobs/:id/logs, one page at a time (lib/paged-body.ts):
 * from the log file on the node that ran it while that node is in the cluster, else from the
 * result the scheduler kept (its last 64 KiB). The first page picks the source and every later
 * page keeps it, so one response never mixes the two. Bytes are passed through untouched.
 * Each attempt of a retried job has its own: the last one is the job's row, an earlier one the
 * record kept when it ended (job_attempts), and the node keeps one log file per attempt.
 * GET /api/gpu/jobs/:id/artifacts pages the tar of the job's /out the same way (source
 * `artifacts`: only on its node, nothing kept by the scheduler; the last attempt that left any).
 */
import type { LogsPage } from "../../../lib/gpu-protocol";
import { decodeOutput } from "../../../lib/output-encoding";
import type { BodyPage } from "../../../lib/paged-body";
import type { AttemptRow, JobRow } from "../store/job-row";
import type { StoredStatus } from "../core/transitions";

export type LogSource = "node" | "result" | "artifacts";
/** The params of `gpu-scheduler.logsPage` (`attempt`: as the first page's request). */
export type LogCursor = { id: string; attempt?: number; source: LogSource; offset: number };

export interface NodeLogs {
  logPage(nodeId: string, jobId: string, offset: number, attempt?: number): Promise<LogsPage>;
  /** NOT_FOUND (code 404) when the node keeps no artifacts of the job. */
  artifactsPage(nodeId: string, jobId: string, offset: number): Promise<LogsPage>;
}

/** One attempt's log: where it ran (`onNode`: its node may have a log file) and the output the scheduler kept. */
export type LogTarget = {
  id: string;
  /** Absent: the job's last attempt, as requested without `?attempt`. */
  attempt?: number;
  /** The attempt the node's log file belongs to (1 for a job that never ran). */
  nodeAttempt: number;
  nodeId: string | null;
  onNode: boolean;
  output: string | null;
  outputBase64: string | null;
};

/** Bytes per page from the kept result (it is at most 64 KiB and a note: usually one page). */
const RESULT_PAGE_BYTES = 256 * 1024;
const ON_NODE: StoredStatus[] = ["running", "completed", "failed", "cancelled"];

/** The job's current or last attempt, from its row; `attempt`: as requested. */
export const lastAttempt = (row: JobRow, attempt?: number): LogTarget => ({
  id: row.id,
  ...(attempt !== undefined && { attempt }),
  nodeAttempt: Math.max(row.attempts ?? 1, 1),
  nodeId: row.node_id,
  onNode: ON_NODE.includes(row.status),
  output: row.output,
  outputBase64: row.output_base64,
});

/** An ended attempt of a retried job, from its kept record. */
export const earlierAttempt = (id: string, kept: AttemptRow): LogTarget => ({
  id,
  attempt: kept.attempt,
  nodeAttempt: kept.attempt,
  nodeId: kept.node_id,
  onNode: true,
  output: kept.output,
  outputBase64: kept.output_base64,
});

export class JobLogs {
  constructor(
    private readonly nodes: NodeLogs,
    private readonly view: { has(nodeId: string): boolean },
    private readonly debug: (message: string) => void = () => undefined,
  ) {}

  async first(job: LogTarget): Promise<BodyPage> {
    if (job.nodeId && job.onNode && this.view.has(job.nodeId)) {
      try {
        return await this.page(job, "node", 0);
      } catch (err) {
        this.debug(`Logs of job ${job.id} (attempt ${job.nodeAttempt}) unavailable on ${job.nodeId}: ${(err as Error).message}`);
      }
    }
    return this.page(job, "result", 0);
  }

  /** The first page of the job's artifacts; null when there are none (yet), or its node has left. */
  async firstArtifacts(job: LogTarget): Promise<BodyPage | null> {
    if (!job.nodeId || !job.onNode || !this.view.has(job.nodeId)) return null;
    try {
      return await this.page(job, "artifacts", 0);
    } catch (err) {
      if ((err as { code?: number }).code === 404) return null;
      throw err;
    }
  }

  async page(job: LogTarget, source: LogSource, offset: number): Promise<BodyPage> {
    const cursor = { id: job.id, ...(job.attempt !== undefined && { attempt: job.attempt }), source };
    const next = (nextOffset: number | null): BodyPage["next"] => (nextOffset === null ? null : { ...cursor, offset: nextOffset });
    if (source !== "result") {
      if (!job.nodeId) throw new Error(`Job ${job.id} ran on no node`);
      const page =
        source === "node" ? await this.nodes.logPage(job.nodeId, job.id, offset, job.nodeAttempt) : await this.nodes.artifactsPage(job.nodeId, job.id, offset);
      return { data: page.data, next: next(page.nextOffset) };
    }
    const bytes = decodeOutput({ output: job.output ?? "", outputBase64: job.outputBase64 ?? undefined });
    const end = Math.min(bytes.length, offset + RESULT_PAGE_BYTES);
    return { data: bytes.subarray(Math.min(offset, end), end).toString("base64"), next: next(end < bytes.length ? end : null) };
  }
}
