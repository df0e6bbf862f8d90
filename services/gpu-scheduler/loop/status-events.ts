/**
 * The platform event of job status changes (`job.statusChanged`): published once per change a
 * client can see, right after the compare-and-set that committed it (JobsRepository calls
 * `statusChanges` on what it wrote). SSE watchers (job-watch.ts) and webhook delivery wake on it;
 * the state itself is always re-read from PostgreSQL, so a lost event delays, never corrupts.
 */
import type { ServiceBroker } from "moleculer";
import { JOB_STATUS_CHANGED } from "../../../lib/event-names";
import { isTerminal, type JobState, type PublicStatus, type StoredStatus } from "../core/transitions";
import { publicStatus } from "../core/public-status";

export type JobStatusChanged = {
  jobId: string;
  clientId: string;
  status: PublicStatus;
  previous: PublicStatus;
  /** Attempts started so far (a retry's next run is a new `running`). */
  attempts: number;
  at: string;
  /** This change queued a webhook delivery (the job has a webhookUrl and ended): the senders wake only for these. */
  webhook?: true;
};

/** What a compare-and-set wrote back, per job. */
export type WrittenJob = {
  id: string;
  client_id: string;
  status: StoredStatus;
  started_at: Date | null;
  attempts: number;
  webhook_url?: string | null;
  /** Its node (after the write), and its status before it (a set's write reads it in the statement). */
  node_id?: string | null;
  seen_status?: StoredStatus;
  /** It ended here and jobs depend on it (or on its array). */
  dependants?: boolean | null;
};
export type SeenState = Pick<JobState, "status"> & { startedAt?: Date | null };

/** The public status changes among the written jobs (pure): `seen` is what each decision started from. */
export function statusChanges(seen: Map<string, SeenState>, written: WrittenJob[], now: Date): JobStatusChanged[] {
  const changes: JobStatusChanged[] = [];
  for (const row of written) {
    const before = seen.get(row.id);
    if (!before) continue;
    const previous = publicStatus(before.status, before.startedAt ?? null);
    const status = publicStatus(row.status, row.started_at);
    if (previous === status) continue;
    const change: JobStatusChanged = { jobId: row.id, clientId: row.client_id, status, previous, attempts: row.attempts, at: now.toISOString() };
    // As the compare-and-set queues it: a webhook, on the change into a terminal status.
    if (row.webhook_url && isTerminal(row.status) && !isTerminal(before.status)) change.webhook = true;
    changes.push(change);
  }
  return changes;
}

/** The one place status changes leave the scheduler: a broadcast to every scheduler replica (and future consumers). */
export function publishStatusChanges(broker: ServiceBroker, changes: JobStatusChanged[]): void {
  for (const change of changes) void broker.broadcast(JOB_STATUS_CHANGED, change);
}
