/**
 * What a client sees of a job's stored status (transitions.ts's state machine): one table, and
 * the code and SQL that read it derived from it. Pure.
 */
import type { PublicStatus, StoredStatus } from "./transitions";

/** A stored status, narrowed to the jobs that have (or have not) started where `started` is given. */
export type StatusRange = { stored: StoredStatus; started?: boolean };

/**
 * What a client sees of each stored status: the one home of that rule. A job runs once it has
 * started (a node pulling its image holds it `queued`), so `started` splits stored `running` on
 * the node's report of that moment (`startedAt`, the column `started_at`). publicStatus and the
 * SQL below are derived from it (the job counters' categories of migration 11 are history).
 */
export const PUBLIC_STATUS_TABLE: ReadonlyArray<StatusRange & { shows: PublicStatus }> = [
  { stored: "waiting", shows: "queued" },
  { stored: "queued", shows: "queued" },
  { stored: "assigned", shows: "queued" },
  { stored: "running", started: false, shows: "queued" },
  { stored: "running", started: true, shows: "running" },
  { stored: "completed", shows: "completed" },
  { stored: "failed", shows: "failed" },
  { stored: "cancelled", shows: "cancelled" },
];

/** What a client sees of a job. */
export function publicStatus(s: StoredStatus, startedAt: Date | null): PublicStatus {
  const started = Boolean(startedAt);
  return PUBLIC_STATUS_TABLE.find((r) => r.stored === s && (r.started ?? started) === started)!.shows;
}

/** The ranges a client sees as `status`, in the table's order. */
export const rangesShowing = (status: PublicStatus): StatusRange[] =>
  PUBLIC_STATUS_TABLE.filter((r) => r.shows === status).map(({ stored, started }) => (started === undefined ? { stored } : { stored, started }));

const column = (name: string, t?: string) => (t ? `${t}.${name}` : name);

/** SQL: the start condition of a range (`t`: the jobs table's alias), or undefined when it has none. */
export const startedSql = (r: StatusRange, t?: string): string | undefined =>
  r.started === undefined ? undefined : `${column("started_at", t)} IS ${r.started ? "NOT " : ""}NULL`;

/** SQL: whether a job row (`t`: the jobs table's alias) shows as `status`, e.g. `(j.status = 'running' AND j.started_at IS NOT NULL)`. */
export function showsAsSql(status: PublicStatus, t?: string): string {
  const conditions = rangesShowing(status).map((r) => [`${column("status", t)} = '${r.stored}'`, startedSql(r, t)].filter(Boolean).join(" AND "));
  return conditions.length === 1 ? `(${conditions[0]})` : `(${conditions.map((c) => `(${c})`).join(" OR ")})`;
}
