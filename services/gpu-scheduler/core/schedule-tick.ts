/**
 * What one due tick of a schedule does (issue 30), pure: `allow` always runs a job; `forbid` skips
 * the tick (counted) while the last job has not finished; `replace` cancels that job and runs.
 * The next run is the first after now, not after the tick that was due: ticks missed while the
 * platform was down run once, at start-up, not once each.
 */
import { type Cron, nextRun } from "./cron";

export type Concurrency = "allow" | "forbid" | "replace";

export type TickDecision = { run: boolean; cancelLast: boolean; next: Date | null };

export function decideTick(schedule: { concurrency: Concurrency; cron: Cron; timezone: string; lastUnfinished: boolean }, now: Date): TickDecision {
  const next = nextRun(schedule.cron, schedule.timezone, now);
  if (!schedule.lastUnfinished || schedule.concurrency === "allow") return { run: true, cancelLast: false, next };
  if (schedule.concurrency === "forbid") return { run: false, cancelLast: false, next };
  return { run: true, cancelLast: true, next };
}
