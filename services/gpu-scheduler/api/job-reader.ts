/**
 * A job as its account reads it: the caller's own row (another account's is the same 404) and
 * its detail (job-view.ts) with what only the scheduler knows now: its queue position and what
 * it waits for.
 */
import { notFound } from "../../../lib/errors";
import { isUuid } from "../../../lib/uuid";
import type { JobDetail } from "../contract";
import { NodeLabeler, toJobDetail } from "./job-view";
import type { JobsRepository } from "../store/jobs.repository";
import type { JobRow } from "../store/job-row";
import type { QueuePositions } from "./queue-positions";
import type { Clock, Scheduler } from "../loop/scheduler";

/** The params of every action on one job. */
export type JobIdParams = { id: string };

export class JobReader {
  constructor(
    private readonly repo: Pick<JobsRepository, "findForClient">,
    private readonly positions: Pick<QueuePositions, "of">,
    private readonly scheduler: Pick<Scheduler, "waitingFor">,
    private readonly clock: Clock,
    /** What node ids in messages become by default (clients: the opaque labels). */
    private readonly labeler: NodeLabeler,
    private readonly defaultTimeoutS: number,
  ) {}

  /** The caller's job; another account's, or a malformed id, is the same 404. */
  async own(params: JobIdParams, clientId: string): Promise<JobRow> {
    const row = isUuid(params.id) ? await this.repo.findForClient(params.id, clientId) : undefined;
    if (!row) throw notFound("GPU job");
    return row;
  }

  /** `label`: what node ids in messages become (operators: the real ids). */
  detail(row: JobRow, positions?: Map<string, number>, label = this.labeler): JobDetail {
    const waiting = row.status === "queued" ? this.scheduler.waitingFor(row.id, row.gpu_type, row.gpu_count) : undefined;
    const queued = { queuePosition: positions?.get(row.id), waiting };
    return toJobDetail(row, this.clock.now(), label, this.defaultTimeoutS, queued);
  }

  /** Details of `rows`, with the queue positions of the queued ones (queue-positions.ts). */
  async details(rows: JobRow[], label?: NodeLabeler): Promise<JobDetail[]> {
    const positions = await this.positions.of(rows.filter((r) => r.status === "queued").map((r) => r.id));
    return rows.map((r) => this.detail(r, positions, label));
  }
}
