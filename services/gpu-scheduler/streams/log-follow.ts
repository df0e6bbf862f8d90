/**
 * GET /api/gpu/jobs/:id/logs?follow=true as a live paged body (lib/paged-body.ts): each page
 * asks the node that runs (or ran) the followed attempt for the bytes after the cursor, waiting
 * there, bounded, for new ones (gpu-node.follow). When an attempt has ended and all its bytes
 * are sent, the next attempt of a retried job follows; a job not started yet is waited for
 * (woken by job.statusChanged, re-checked at least every second); the body ends once the job
 * has ended and its last attempt is sent. The client leaving calls `stop` (followStop), which
 * ends the node's wait at once.
 */
import type { FollowPage, FollowParams } from "../../../lib/gpu-protocol";
import type { BodyPage } from "../../../lib/paged-body";
import type { StatusWatch } from "./job-watch";
import { emptyPage } from "./job-watch";
import { isTerminal, StoredStatus } from "../core/transitions";

/** The params of `gpu-scheduler.followPage` (`fid`: this follow, for the node's stop). */
export type FollowCursor = { id: string; fid: string; attempt: number; offset: number };

export interface FollowNodes {
  follow(nodeId: string, params: FollowParams): Promise<FollowPage>;
  stopFollow(nodeId: string, fid: string): Promise<void>;
}

/** What following needs of the job's row. */
export type FollowedJob = { id: string; status: StoredStatus; attempts: number; nodeId: string | null };
export type OwnedJob = FollowedJob & { clientId: string };

/**
 * The followed jobs' rows, each read at most once a second per replica however many follow it
 * (a page per follower per line would otherwise be a query each); a job's status change drops its
 * entry at once (`forget`, from the job.statusChanged broadcast). Being a second late on a change
 * the broadcast does not carry (a placement) costs nothing: pages re-check it.
 */
export class FollowedJobs {
  private readonly entries = new Map<string, { job: Promise<OwnedJob | undefined>; until: number }>();

  constructor(
    private readonly read: (id: string) => Promise<OwnedJob | undefined>,
    private readonly ttlMs = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The job if it is `clientId`'s (another account's is the same undefined as none). */
  async get(id: string, clientId: string): Promise<FollowedJob | undefined> {
    const now = this.now();
    let entry = this.entries.get(id);
    if (!entry || entry.until < now) {
      if (this.entries.size > 10_000) for (const [key, e] of this.entries) if (e.until < now) this.entries.delete(key);
      entry = { job: this.read(id), until: now + this.ttlMs };
      this.entries.set(id, entry);
      entry.job.catch(() => this.entries.delete(id));
    }
    const job = await entry.job;
    return job?.clientId === clientId ? job : undefined;
  }

  forget(id: string): void {
    this.entries.delete(id);
  }
}

/**
 * Where an attempt stands (pure): not started yet; never to start (the job ended first); still
 * running on the job's node (its log may grow); the job's last, ended; or ended with more to come.
 */
export type Standing = "unstarted" | "never" | "growing" | "last" | "ended";

export function standing(job: FollowedJob, attempt: number): Standing {
  const terminal = isTerminal(job.status);
  if (attempt > job.attempts) return terminal ? "never" : "unstarted";
  if (attempt < job.attempts) return "ended";
  if (terminal) return "last";
  return job.nodeId && (job.status === "assigned" || job.status === "running") ? "growing" : "ended";
}

/** A job still queued, or whose node has not reported yet, is checked again this often at least. */
const RECHECK_MS = 1000;
const END: BodyPage = { data: "", next: null };

export class LogFollow {
  constructor(
    private readonly nodes: FollowNodes,
    private readonly view: { has(nodeId: string): boolean },
    /** The node an ended attempt ran on (its kept record). */
    private readonly attemptNode: (jobId: string, attempt: number) => Promise<string | null>,
    private readonly watch: StatusWatch,
  ) {}

  /** The next page after `c`; `waitMs` 0 answers at once (the first page). */
  async page(job: FollowedJob, c: FollowCursor, waitMs: number): Promise<BodyPage> {
    const where = standing(job, c.attempt);
    if (where === "never") return END;
    if (where === "unstarted") return this.recheck(c, waitMs);
    const nodeId = await this.nodeOf(job, c.attempt, where);
    const after = where === "last" ? END : emptyPage({ ...c, attempt: c.attempt + 1, offset: 0 });
    if (!nodeId || !this.view.has(nodeId)) return where === "growing" ? this.recheck(c, waitMs) : after; // its node left: GET /logs has the kept result
    const params = { jobId: job.id, attempt: c.attempt, offset: c.offset, fid: c.fid, waitMs: where === "growing" ? waitMs : 0 };
    const got = await this.nodes.follow(nodeId, params).catch(() => null);
    if (got?.data) return { data: got.data, next: { ...c, offset: got.end } };
    if (where !== "growing") return got ? after : this.recheck(c, waitMs);
    // The node has finished the attempt (or did not answer) before its status is committed: wait for it.
    return got?.live ? emptyPage(c) : this.recheck(c, waitMs);
  }

  /** The client left: ends the wait of the page in flight on the node. */
  async stop(job: FollowedJob, c: FollowCursor): Promise<void> {
    const where = standing(job, c.attempt);
    if (where === "never" || where === "unstarted") return;
    const nodeId = await this.nodeOf(job, c.attempt, where);
    if (nodeId && this.view.has(nodeId)) await this.nodes.stopFollow(nodeId, c.fid);
  }

  private nodeOf(job: FollowedJob, attempt: number, where: Standing): Promise<string | null> {
    return where === "growing" || (where === "last" && job.nodeId) ? Promise.resolve(job.nodeId) : this.attemptNode(job.id, attempt);
  }

  /** Nothing to send until the job's status changes (or a second passes): then the gateway asks again. */
  private async recheck(c: FollowCursor, waitMs: number): Promise<BodyPage> {
    if (waitMs > 0) await this.watch.wait(c.id, Math.min(waitMs, RECHECK_MS)).changed;
    return emptyPage(c);
  }
}
