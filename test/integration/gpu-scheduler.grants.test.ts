/**
 * The credentials of jobs with platformAccess (loop/platform-grants.ts, store/grants.repository.ts)
 * against the real PostgreSQL: made at dispatch and handed to the node, revoked once the attempt
 * no longer runs — a lost node, a retry — by a sweep of another PlatformGrants (a restarted or
 * other replica: the record is the table, not memory). auth and dbaas are fakes of their actions
 * here (test/integration/dbaas.job-roles.test.ts runs the real roles; the e2e test the whole path).
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import type { NodeHeartbeat } from "../../lib/gpu-protocol";
import type { RunJobParams } from "../../lib/job-spec";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { PlatformCalls, PlatformGrants } from "../../services/gpu-scheduler/loop/platform-grants";
import { Clock, NodeClient, Scheduler } from "../../services/gpu-scheduler/loop/scheduler";
import { GrantsRepository } from "../../services/gpu-scheduler/store/grants.repository";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { PlacementRepository } from "../../services/gpu-scheduler/store/placement.repository";
import { dropDatabase, testDatabaseUrl, waitFor } from "../support/platform";

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} } as unknown as LoggerInstance;
const CLIENT = randomUUID();
// A retry waits an hour of the manual clock: the test decides when it is placed again.
const SETTINGS = { nodeTimeoutMs: 3000, dispatchTimeoutMs: 1000, warmUpMs: 0, retryBackoffS: 3600 };

class ManualClock implements Clock {
  constructor(public ms = Date.now()) {}
  now = () => new Date(this.ms);
}

class Nodes implements NodeClient {
  runs: RunJobParams[] = [];
  async run(_nodeId: string, params: RunJobParams) {
    this.runs.push(params);
  }
  async cancel() {
    return { stopped: true };
  }
}

/** auth's and dbaas's job actions: what was issued and revoked, per job. */
class Calls implements PlatformCalls {
  log: string[] = [];
  async issueToken(p: { jobId: string }) {
    this.log.push(`token ${p.jobId}`);
    return { token: `cit_${"1".repeat(32)}` };
  }
  async revokeTokens(jobId: string) {
    this.log.push(`revoke token ${jobId}`);
  }
  async grantRole(p: { jobId: string; databaseId: string }) {
    this.log.push(`role ${p.jobId}`);
    return { database: "client_00000000_00000000", user: "job_0000000000000000", password: "x".repeat(32) };
  }
  async revokeRoles(jobId: string) {
    this.log.push(`revoke roles ${jobId}`);
  }
}

const heartbeat = (nodeId: string, cards: string[], at: Date): NodeHeartbeat => ({
  nodeId,
  cards: cards.map((uuid, index) => ({ uuid, index, name: "NVIDIA GeForce RTX 3060", memoryTotal: 12288, memoryUsed: 0, utilization: 0, temperature: 40 })),
  runningJobIds: [],
  executor: "process",
  at: at.toISOString(),
});

describe("gpu-scheduler grants - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pool: Pool;
  let repo: JobsRepository;

  const setUp = () => {
    const clock = new ManualClock();
    const nodes = new Nodes();
    const calls = new Calls();
    const grants = new PlatformGrants(new GrantsRepository(pool), calls, quiet);
    const scheduler = new Scheduler(repo, new PlacementRepository(pool), nodes, clock, quiet, SETTINGS, undefined, undefined, undefined, grants);
    return { clock, nodes, calls, scheduler };
  };
  const newJob = async (over: Record<string, unknown> = {}) =>
    (
      await repo.insert(
        [
          {
            id: randomUUID(),
            clientId: CLIENT,
            spec: { command: "true", timeoutSeconds: 60, platformAccess: { scopes: ["inference"], databases: ["d"] }, ...over },
          },
        ],
        new Date(),
      )
    )[0].id;
  const rows = async () => (await pool.query("SELECT job_id, attempt, settled FROM gpu_scheduler.job_grants ORDER BY attempt")).rows;
  /** A new replica's sweep (or this one's after a restart): nothing but the table tells it what to revoke. */
  const sweepElsewhere = (calls: Calls) => new PlatformGrants(new GrantsRepository(pool), calls, quiet).sweep();

  beforeAll(async () => {
    await ensureDatabase(url);
    pool = newPool({ connectionString: url, max: 8 });
    pool.on("error", () => undefined);
    await migrate(pool, "gpu_scheduler", migrations);
    repo = new JobsRepository(pool);
  });
  beforeEach(async () => {
    await pool.query("TRUNCATE gpu_scheduler.jobs, gpu_scheduler.job_attempts, gpu_scheduler.account_usage, gpu_scheduler.job_grants");
  });
  afterAll(async () => {
    await pool.end();
    await dropDatabase(url);
  });

  test("gpu-scheduler grants - a lost node's job: its credentials are revoked by the next sweep, on any replica", async () => {
    const { clock, nodes, scheduler } = setUp();
    await scheduler.heartbeat(heartbeat("n1", ["a0"], clock.now()));
    const id = await newJob();
    await scheduler.schedule();
    await waitFor(async () => (await repo.find(id))!.status === "running", { message: "the job running" });
    expect(nodes.runs[0].platform).toEqual({ token: `cit_${"1".repeat(32)}`, databases: [expect.objectContaining({ user: "job_0000000000000000" })] });
    expect(await rows()).toEqual([{ job_id: id, attempt: 1, settled: true }]);
    const elsewhere = new Calls();
    expect(await sweepElsewhere(elsewhere)).toBe(0); // still running: nothing to revoke

    clock.ms += SETTINGS.nodeTimeoutMs + 1;
    await scheduler.tick();
    expect((await repo.find(id))!.status).toBe("failed");
    expect(await sweepElsewhere(elsewhere)).toBe(1);
    expect(elsewhere.log.sort()).toEqual([`revoke roles ${id}`, `revoke token ${id}`]);
    expect(await rows()).toEqual([]);
    await scheduler.stop();
  });

  test("gpu-scheduler grants - a retried job: the first attempt's credentials go before the second attempt's are made", async () => {
    const { clock, nodes, calls, scheduler } = setUp();
    await scheduler.heartbeat(heartbeat("n1", ["a0"], clock.now()));
    const id = await newJob({ maxRetries: 1 });
    await pool.query("UPDATE gpu_scheduler.jobs SET max_retries = 1 WHERE id = $1", [id]);
    await scheduler.schedule();
    await waitFor(async () => (await repo.find(id))!.status === "running", { message: "attempt 1 running" });
    const at = clock.now().toISOString();
    await scheduler.applyEvent({ type: "finished", jobId: id, nodeId: "n1", gpuUuid: "a0", at, startedAt: at, exitCode: 1, output: "", attempt: 1 });
    await waitFor(async () => (await repo.find(id))!.status === "queued", { message: "back in the queue" });
    // Swept before the retry is placed (the usual order, the backoff being seconds): attempt 1's are gone.
    expect(await sweepElsewhere(calls)).toBe(1);
    expect(await rows()).toEqual([]);
    clock.ms += 3600_000 + 1;
    await scheduler.heartbeat(heartbeat("n1", ["a0"], clock.now()));
    await scheduler.schedule();
    await waitFor(() => nodes.runs.length === 2, { message: "attempt 2 dispatched" });
    expect(nodes.runs[1]).toMatchObject({ attempt: 2, platform: { token: expect.any(String) } });
    expect(calls.log.slice(0, 2)).toEqual([`token ${id}`, `role ${id}`]);
    expect(calls.log.slice(2, 4).sort()).toEqual([`revoke roles ${id}`, `revoke token ${id}`]);
    expect(calls.log.slice(4)).toEqual([`token ${id}`, `role ${id}`]);
    expect(await rows()).toEqual([{ job_id: id, attempt: 2, settled: true }]);
    await scheduler.stop();
  });

  test("gpu-scheduler grants - a grant still being made is left alone until it settles or goes stale; one being swept blocks a new attempt's", async () => {
    const grants = new GrantsRepository(pool);
    const id = await newJob(); // queued: not running
    await grants.begin(id, 1, true, async () => undefined);
    expect(await grants.claimEnded(10)).toEqual([]); // unsettled and fresh
    await pool.query("UPDATE gpu_scheduler.job_grants SET created_at = now() - interval '1 hour'");
    const [claimed] = await grants.claimEnded(10);
    expect(claimed).toEqual({ job_id: id, attempt: 1, databases: true });
    expect(await grants.claimEnded(10)).toEqual([]); // leased to the first sweep
    await expect(grants.begin(id, 2, false, async () => undefined)).rejects.toThrow(/being revoked/);
    await grants.release(claimed);
    const revoked: number[] = [];
    await grants.begin(id, 2, false, async (earlier) => void revoked.push(...earlier.map((g) => g.attempt)));
    expect(revoked).toEqual([1]);
    expect(await rows()).toEqual([{ job_id: id, attempt: 2, settled: false }]);
  });
});
