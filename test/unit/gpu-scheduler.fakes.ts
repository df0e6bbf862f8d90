/**
 * In-memory stand-ins for the scheduler's seams (the job and placement repositories, gpu-nodes,
 * the clock), so its parts are unit-tested without PostgreSQL or a broker. The repositories
 * themselves are tested against PostgreSQL in test/integration/gpu-scheduler.queue.test.ts.
 */
import type { LoggerInstance } from "moleculer";
import type { NodeHeartbeat } from "../../lib/gpu-protocol";
import type { RunJobParams } from "../../lib/job-spec";
import type { EventStore } from "../../services/gpu-scheduler/loop/event-applier";
import type { HousekeepingStore } from "../../services/gpu-scheduler/loop/housekeeping";
import type { StoredJob } from "../../lib/job-spec";
import type { AssignedJob, PlacementRow, PlacementSnapshot } from "../../services/gpu-scheduler/store/placement.repository";
import type { PlacementStore } from "../../services/gpu-scheduler/loop/placement-loop";
import type { Clock, NodeClient } from "../../services/gpu-scheduler/loop/ports";
import { ClusterView } from "../../services/gpu-scheduler/core/cluster-view";
import { JobWriter } from "../../services/gpu-scheduler/loop/job-writer";
import { NodeStopper } from "../../services/gpu-scheduler/loop/node-stopper";
import { isTerminal, JobPatch, JobState } from "../../services/gpu-scheduler/core/transitions";

export const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} } as unknown as LoggerInstance;

export class ManualClock implements Clock {
  constructor(public ms = Date.parse("2026-01-01T00:00:00Z")) {}
  now = () => new Date(this.ms);
  advance(ms: number) {
    this.ms += ms;
  }
}

export type FakeJob = JobState & {
  seq: number;
  gpuType: string | null;
  command: string;
  /** As submitted (lib/job-spec.ts), handed to the node with a grant. */
  platformAccess?: StoredJob["platformAccess"];
  queueTimeoutS?: number;
  queueDeadline?: Date;
  notBefore?: Date | null;
  /** Ended attempts kept by retries. */
  endedAttempts?: NonNullable<JobPatch["endedAttempt"]>[];
};

export const blankJob = (over: Partial<FakeJob> = {}): FakeJob => ({
  status: "queued",
  nodeId: null,
  gpuUuid: null,
  holding: false,
  startedAt: null,
  completedAt: null,
  exitCode: null,
  output: null,
  errorMessage: null,
  seq: 0,
  gpuType: null,
  assignedAt: null,
  command: "true",
  ...over,
});

const stateOf = (j: FakeJob): JobState => ({
  status: j.status,
  nodeId: j.nodeId,
  gpuUuid: j.gpuUuid,
  holding: j.holding,
  assignedAt: j.assignedAt,
  startedAt: j.startedAt,
  completedAt: j.completedAt,
  exitCode: j.exitCode,
  output: j.output,
  errorMessage: j.errorMessage,
  ...(j.attempts !== undefined && { attempts: j.attempts }),
  ...(j.maxRetries !== undefined && { maxRetries: j.maxRetries }),
});

/** The jobs table as a map, with the repositories' semantics (compare-and-set on status, holding, node, card). */
export class FakeJobs implements EventStore, HousekeepingStore, PlacementStore {
  jobs = new Map<string, FakeJob>();
  writes = 0;
  /** Runs before each compare-and-set (to change a job behind the decision's back). */
  beforeWrite: () => void = () => undefined;

  add(id: string, over: Partial<FakeJob> = {}): string {
    this.jobs.set(id, blankJob({ seq: this.jobs.size + 1, ...over }));
    return id;
  }

  get(id: string): FakeJob {
    return this.jobs.get(id)!;
  }

  async states(ids: string[]) {
    return new Map(ids.filter((id) => this.jobs.has(id)).map((id) => [id, stateOf(this.get(id))]));
  }

  async statesOnNode(nodeId: string) {
    return new Map([...this.jobs].filter(([, j]) => j.nodeId === nodeId && j.holding).map(([id, j]) => [id, stateOf(j)]));
  }

  async compareAndSet(updates: Array<{ id: string; seen: JobState; patch: JobPatch }>) {
    this.beforeWrite();
    this.writes++;
    const written = new Set<string>();
    for (const { id, seen, patch } of updates) {
      const j = this.jobs.get(id);
      const moved = j && (j.status !== seen.status || j.holding !== seen.holding || j.nodeId !== seen.nodeId || j.gpuUuid !== seen.gpuUuid);
      // A preemption asked since the decision read the job: decided again (as jobs.repository.ts compares preempting).
      if (!j || moved || Boolean(j.preempting) !== Boolean(seen.preempting)) continue;
      const { endedAttempt, ...columns } = patch;
      Object.assign(j, columns);
      if (endedAttempt) j.endedAttempts = [...(j.endedAttempts ?? []), endedAttempt];
      if ("nodeId" in patch) Object.assign(j, { nodeId: null, gpuUuid: null, assignedAt: null });
      written.add(id);
    }
    return written;
  }

  async placements(ids: string[]) {
    return ids
      .filter((id) => this.jobs.has(id))
      .map((id) => ({ id, status: this.get(id).status, node_id: this.get(id).nodeId, exit_code: this.get(id).exitCode }));
  }

  async nodesHoldingCards() {
    return [...new Set([...this.jobs.values()].filter((j) => j.holding).map((j) => j.nodeId!))];
  }

  async running() {
    return [...this.jobs].filter(([, j]) => j.holding && j.status === "running").map(([id, j]) => ({ id, node_id: j.nodeId! }));
  }

  async staleAssigned(before: Date) {
    return [...this.jobs].filter(([, j]) => j.status === "assigned" && j.assignedAt! < before).map(([id, j]) => ({ id, node_id: j.nodeId! }));
  }

  async staleHolding(before: Date) {
    return [...this.jobs].filter(([, j]) => j.holding && isTerminal(j.status) && j.completedAt! < before).map(([id, j]) => ({ id, node_id: j.nodeId! }));
  }

  async expiredQueued(now: Date, limit: number) {
    return [...this.jobs]
      .filter(([, j]) => j.status === "queued" && j.queueDeadline && j.queueDeadline <= now && !j.attempts)
      .slice(0, limit)
      .map(([id, j]) => ({ id, queue_timeout_seconds: j.queueTimeoutS! }));
  }

  async anyQueued() {
    return [...this.jobs.values()].some((j) => j.status === "queued");
  }

  async placeUnderLock(cardCount: number, decide: (s: PlacementSnapshot) => PlacementRow[] | Promise<PlacementRow[]>, now: Date) {
    const held = new Set([...this.jobs.values()].filter((j) => j.holding).map((j) => j.gpuUuid!));
    // As the repository: the oldest queued jobs of each requested type, as many as there may be free cards.
    const perType = new Map<string, number>();
    const queue = [...this.jobs]
      .filter(([, j]) => j.status === "queued" && !(j.notBefore && j.notBefore > now))
      .sort(([, a], [, b]) => a.seq - b.seq)
      .filter(([, j]) => {
        const type = (j.gpuType ?? "").toLowerCase();
        perType.set(type, (perType.get(type) ?? 0) + 1);
        return perType.get(type)! <= cardCount - held.size;
      })
      .map(([id, j]) => ({ jobId: id, gpuType: j.gpuType, seq: j.seq }));
    const placements = queue.length ? await decide({ held, queue }) : [];
    const assigned: AssignedJob[] = [];
    for (const p of placements) {
      const j = this.get(p.jobId);
      if (j.status !== "queued") continue;
      Object.assign(j, { status: "assigned", nodeId: p.nodeId, gpuUuid: p.gpuUuid, holding: true, assignedAt: now, attempts: (j.attempts ?? 0) + 1 });
      assigned.push({
        id: p.jobId,
        client_id: "client-1",
        node_id: p.nodeId,
        gpu_uuid: p.gpuUuid,
        gpu_uuids: p.gpuUuids,
        spec: { command: j.command, ...(j.platformAccess && { platformAccess: j.platformAccess }) },
        env: null,
        assigned_at: now,
        attempts: j.attempts!,
        max_retries: j.maxRetries ?? 0,
      });
    }
    return { planned: placements.length, assigned };
  }
}

/** gpu-nodes that record every call; `onRun` decides how a run call answers. */
export class FakeNodes implements NodeClient {
  runs: Array<RunJobParams & { nodeId: string }> = [];
  cancels: Array<{ nodeId: string; jobId: string }> = [];
  onRun: (nodeId: string, params: RunJobParams) => Promise<void> = async () => undefined;
  stopped = true;

  async run(nodeId: string, params: RunJobParams) {
    this.runs.push({ ...params, nodeId });
    await this.onRun(nodeId, params);
  }

  async cancel(nodeId: string, jobId: string) {
    this.cancels.push({ nodeId, jobId });
    return { stopped: this.stopped };
  }
}

export const heartbeat = (nodeId: string, cards: string[], runningJobIds: string[] = [], name = "NVIDIA GeForce RTX 3060"): NodeHeartbeat => ({
  nodeId,
  cards: cards.map((uuid, index) => ({ uuid, index, name, memoryTotal: 12288, memoryUsed: 0, utilization: 0, temperature: 40 })),
  runningJobIds,
  executor: "process",
  at: new Date(0).toISOString(),
});

/** Polls `cond` until it holds (2 s deadline); for work the code under test leaves running in the background. */
export async function until(cond: () => boolean, what = "the condition"): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The parts every scheduler module is built from, on fakes: a clock, the jobs, the nodes, the view. */
export function fakeCluster() {
  const clock = new ManualClock();
  const store = new FakeJobs();
  const nodes = new FakeNodes();
  const view = new ClusterView(clock.now().getTime());
  const writer = new JobWriter(store);
  const stopper = new NodeStopper(nodes, writer, () => undefined, quiet);
  return { clock, store, nodes, view, writer, stopper };
}
