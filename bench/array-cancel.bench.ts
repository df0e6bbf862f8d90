/**
 * bench:array-cancel — cancelling a whole job array (POST /api/gpu/arrays/:id/cancel's database
 * work) against the real PostgreSQL, in one run, alternating:
 * - set: JobsRepository.cancelUnfinished, one statement for the whole array (the state machine's
 *   `cancelPatch`);
 * - per job: what it replaced, the jobs read and cancelled by compare-and-set (`cancelJob` per job)
 *   in chunks of 1,000 (JobWriter.applyTo).
 * Each round inserts a fresh array of BENCH_ARRAY (default 10,000) queued jobs with a webhook URL
 * (so each cancel also queues one delivery per job) and cancels it. BENCH_ROUNDS (default 3) each.
 */
import { randomUUID } from "crypto";
import { ensureDatabase, migrate, newPool, transaction } from "../lib/db";
import { cancelJob, cancelPatch } from "../services/gpu-scheduler/core/transitions";
import { JobWriter } from "../services/gpu-scheduler/loop/job-writer";
import { migrations } from "../services/gpu-scheduler/migrations";
import { DependenciesRepository } from "../services/gpu-scheduler/store/dependencies.repository";
import { JobsRepository } from "../services/gpu-scheduler/store/jobs.repository";
import { insertGroup } from "../services/gpu-scheduler/store/submit-group";
import { dropDatabase, testDatabaseUrl } from "../test/support/platform";

const JOBS = Number(process.env.BENCH_ARRAY || 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS || 3);
const CHUNK = 1000;
const REASON = "the array was cancelled";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (n: number) => n.toFixed(0);

async function main() {
  const url = testDatabaseUrl();
  await ensureDatabase(url);
  const pool = newPool({ connectionString: url, max: 4 });
  try {
    await migrate(pool, "gpu_scheduler", migrations);
    const repo = new JobsRepository(pool);
    const writer = new JobWriter(repo);
    const deps = new DependenciesRepository(pool);
    const newArray = async (): Promise<{ arrayId: string; ids: string[] }> => {
      const clientId = randomUUID();
      const arrayId = randomUUID();
      const spec = { command: "true", timeoutSeconds: 3600, webhookUrl: "https://hooks.example.com/gpu" };
      const jobs = Array.from({ length: JOBS }, () => ({ id: randomUUID(), clientId, spec }));
      const group = { clientId, jobs, array: { id: arrayId, parallelism: null }, dependsOn: [], status: "queued" as const, statusReason: null };
      await transaction(pool, (tx) => insertGroup(tx, group, new Date(), deps));
      return { arrayId, ids: jobs.map((j) => j.id) };
    };
    const ways = {
      set: async ({ arrayId }: { arrayId: string }) => (await repo.cancelUnfinished(arrayId, cancelPatch(new Date(), REASON))).length,
      "per job": async ({ ids }: { ids: string[] }) => {
        let n = 0;
        for (let i = 0; i < ids.length; i += CHUNK) {
          const { written } = await writer.applyTo(ids.slice(i, i + CHUNK), (job) => {
            const outcome = cancelJob(job, new Date(), REASON);
            return outcome.ok ? outcome.patch : null;
          });
          n += written.size;
        }
        return n;
      },
    };
    const times: Record<keyof typeof ways, number[]> = { set: [], "per job": [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = (round % 2 ? ["per job", "set"] : ["set", "per job"]) as Array<keyof typeof ways>;
      for (const way of order) {
        const array = await newArray();
        const t0 = performance.now();
        const n = await ways[way](array);
        times[way].push(performance.now() - t0);
        if (n !== JOBS) throw new Error(`${way}: ${n} of ${JOBS} jobs cancelled`);
      }
    }
    console.log(`bench:array-cancel — an array of ${JOBS} queued jobs (each with a webhook) cancelled, ${ROUNDS} rounds alternating`);
    for (const [way, ms] of Object.entries(times)) console.log(`  ${way}: median ${fmt(median(ms))} ms (${ms.map(fmt).join(", ")})`);
    console.log(`  set ÷ per job: ${(median(times.set) / median(times["per job"])).toFixed(2)}× the time`);
  } finally {
    await pool.end();
    await dropDatabase(url);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
