/**
 * Schedule ticks against the real PostgreSQL (loop/schedule-ticker.ts, store/schedules.repository.ts):
 * exactly one job per tick with two replicas claiming at once, ticks missed while nothing ran made
 * up once at start-up, forbid and replace.
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { migrations } from "../../services/gpu-scheduler/migrations";
import { JobsRepository } from "../../services/gpu-scheduler/store/jobs.repository";
import { SchedulesRepository } from "../../services/gpu-scheduler/store/schedules.repository";
import { ScheduleTicker } from "../../services/gpu-scheduler/loop/schedule-ticker";
import { dropDatabase, testDatabaseUrl } from "../support/platform";

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} } as unknown as LoggerInstance;
const CLIENT = randomUUID();

describe("gpu-scheduler schedules - against PostgreSQL", () => {
  const url = testDatabaseUrl();
  let pools: Pool[] = [];
  let now = new Date("2026-06-01T12:00:30Z");
  const cancelled: string[] = [];

  const ticker = (pool: Pool) =>
    new ScheduleTicker(
      {
        schedules: new SchedulesRepository(pool),
        jobs: new JobsRepository(pool),
        queuedLimit: async () => 1000,
        cancel: async (jobId) => {
          cancelled.push(jobId);
          await pool.query(`UPDATE gpu_scheduler.jobs SET status = 'cancelled', completed_at = now() WHERE id = $1`, [jobId]);
          return true;
        },
        queued: () => undefined,
        clock: { now: () => now },
        defaultTimeoutS: 3600,
      },
      quiet,
    );
  const schedule = async (nextRunAt: Date, concurrency = "forbid", cron = "* * * * *") => {
    const id = randomUUID();
    await new SchedulesRepository(pools[0]).insert({
      id,
      client_id: CLIENT,
      name: "nightly",
      cron,
      timezone: "UTC",
      concurrency: concurrency as "forbid",
      job: { command: "echo hi", gpuType: null },
      env: { SECRET: "s" },
      paused: false,
      next_run_at: nextRunAt,
      created_at: now,
      updated_at: now,
    });
    return id;
  };
  const jobsOf = async (scheduleId: string) =>
    (
      await pools[0].query<{ id: string; status: string; env: Record<string, string> }>(
        `SELECT id, status, env FROM gpu_scheduler.jobs WHERE schedule_id = $1 ORDER BY seq`,
        [scheduleId],
      )
    ).rows;
  const row = async (id: string) => (await new SchedulesRepository(pools[0]).findForClient(id, CLIENT))!;

  beforeAll(async () => {
    await ensureDatabase(url);
    pools = [newPool({ connectionString: url, max: 4 }), newPool({ connectionString: url, max: 4 })];
    for (const pool of pools) pool.on("error", () => undefined);
    await migrate(pools[0], "gpu_scheduler", migrations);
  });
  beforeEach(async () => {
    await pools[0].query("TRUNCATE gpu_scheduler.jobs, gpu_scheduler.schedules");
    now = new Date("2026-06-01T12:00:30Z");
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await dropDatabase(url);
  });

  test("schedules - two replicas ticking at once make exactly one job per tick", async () => {
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => schedule(new Date("2026-06-01T12:00:00Z"), "allow")));
    const replicas = [ticker(pools[0]), ticker(pools[1]), ticker(pools[0]), ticker(pools[1])];
    const made = (await Promise.all(replicas.map((r) => r.tick()))).flat();
    expect(made).toHaveLength(5);
    for (const id of ids) {
      const jobs = await jobsOf(id);
      expect(jobs).toHaveLength(1);
      expect(jobs[0].env).toEqual({ SECRET: "s" });
      const s = await row(id);
      expect(s.last_job_id).toBe(jobs[0].id);
      expect(s.next_run_at!.toISOString()).toBe("2026-06-01T12:01:00.000Z");
    }
    // The same tick again, on either replica: nothing more.
    expect((await Promise.all(replicas.map((r) => r.tick()))).flat()).toEqual([]);
  });

  test("schedules - ticks missed while the platform was down run once at start-up, then on time", async () => {
    const id = await schedule(new Date("2026-06-01T09:00:00Z"), "allow"); // 180 one-minute ticks missed
    now = new Date("2026-06-01T12:00:30Z");
    await ticker(pools[0]).tick();
    expect(await jobsOf(id)).toHaveLength(1);
    expect((await row(id)).next_run_at!.toISOString()).toBe("2026-06-01T12:01:00.000Z");
    await ticker(pools[1]).tick();
    expect(await jobsOf(id)).toHaveLength(1);
    now = new Date("2026-06-01T12:01:00Z");
    await ticker(pools[1]).tick();
    expect(await jobsOf(id)).toHaveLength(2);
  });

  test("schedules - forbid skips a tick while the last job runs, replace cancels it", async () => {
    const forbid = await schedule(new Date("2026-06-01T12:00:00Z"), "forbid");
    const replace = await schedule(new Date("2026-06-01T12:00:00Z"), "replace");
    const t = ticker(pools[0]);
    await t.tick();
    now = new Date("2026-06-01T12:01:05Z");
    await t.tick();
    expect(await jobsOf(forbid)).toHaveLength(1);
    expect((await row(forbid)).skipped).toBe(1);
    const replaced = await jobsOf(replace);
    expect(replaced.map((j) => j.status)).toEqual(["cancelled", "queued"]);
    expect(cancelled).toContain(replaced[0].id);
    // Once the forbid schedule's job ended, its next tick runs.
    await pools[0].query(`UPDATE gpu_scheduler.jobs SET status = 'completed', completed_at = now() WHERE schedule_id = $1`, [forbid]);
    now = new Date("2026-06-01T12:02:00Z");
    await t.tick();
    expect(await jobsOf(forbid)).toHaveLength(2);
  });

  test("schedules - a paused schedule does not tick", async () => {
    const id = await schedule(new Date("2026-06-01T12:00:00Z"));
    await new SchedulesRepository(pools[0]).update(id, CLIENT, { paused: true }, now);
    await ticker(pools[0]).tick();
    expect(await jobsOf(id)).toHaveLength(0);
  });
});
