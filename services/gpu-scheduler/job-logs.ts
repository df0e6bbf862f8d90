/**
 * A job's whole output for GET /api/gpu/jobs/:id/logs, one page at a time (lib/paged-body.ts):
 * from the log file on the node that ran it while that node is in the cluster, else from the
 * result the scheduler kept (its last 64 KiB). The first page picks the source and every later
 * page keeps it, so one response never mixes the two. Bytes are passed through untouched.
 * GET /api/gpu/jobs/:id/artifacts pages the tar of the job's /out the same way (source
 * `artifacts`: only on its node, nothing kept by the scheduler).
 */
import type { LogsPage } from "../../lib/gpu-protocol";
import { decodeOutput } from "../../lib/output-encoding";
import type { BodyPage } from "../../lib/paged-body";
import type { JobRow } from "./jobs.repository";
import type { StoredStatus } from "./transitions";

export type LogSource = "node" | "result" | "artifacts";
/** The params of `gpu-scheduler.logsPage`. */
export type LogCursor = { id: string; source: LogSource; offset: number };

export interface NodeLogs {
  logPage(nodeId: string, jobId: string, offset: number): Promise<LogsPage>;
  /** NOT_FOUND (code 404) when the node keeps no artifacts of the job. */
  artifactsPage(nodeId: string, jobId: string, offset: number): Promise<LogsPage>;
}

/** Bytes per page from the kept result (it is at most 64 KiB and a note: usually one page). */
const RESULT_PAGE_BYTES = 256 * 1024;
const ON_NODE: StoredStatus[] = ["running", "completed", "failed", "cancelled"];

export class JobLogs {
  constructor(
    private readonly nodes: NodeLogs,
    private readonly view: { has(nodeId: string): boolean },
    private readonly debug: (message: string) => void = () => undefined,
  ) {}

  async first(row: JobRow): Promise<BodyPage> {
    if (row.node_id && ON_NODE.includes(row.status) && this.view.has(row.node_id)) {
      try {
        return await this.page(row, "node", 0);
      } catch (err) {
        this.debug(`Logs of job ${row.id} unavailable on ${row.node_id}: ${(err as Error).message}`);
      }
    }
    return this.page(row, "result", 0);
  }

  /** The first page of the job's artifacts; null when there are none (yet), or its node has left. */
  async firstArtifacts(row: JobRow): Promise<BodyPage | null> {
    if (!row.node_id || !ON_NODE.includes(row.status) || !this.view.has(row.node_id)) return null;
    try {
      return await this.page(row, "artifacts", 0);
    } catch (err) {
      if ((err as { code?: number }).code === 404) return null;
      throw err;
    }
  }

  async page(row: JobRow, source: LogSource, offset: number): Promise<BodyPage> {
    const next = (nextOffset: number | null): BodyPage["next"] => (nextOffset === null ? null : { id: row.id, source, offset: nextOffset });
    if (source !== "result") {
      if (!row.node_id) throw new Error(`Job ${row.id} ran on no node`);
      const read = source === "node" ? this.nodes.logPage : this.nodes.artifactsPage;
      const page = await read.call(this.nodes, row.node_id, row.id, offset);
      return { data: page.data, next: next(page.nextOffset) };
    }
    const bytes = decodeOutput({ output: row.output ?? "", outputBase64: row.output_base64 ?? undefined });
    const end = Math.min(bytes.length, offset + RESULT_PAGE_BYTES);
    return { data: bytes.subarray(Math.min(offset, end), end).toString("base64"), next: next(end < bytes.length ? end : null) };
  }
}
