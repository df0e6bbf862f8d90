/**
 * bench:usage — the usage and quota endpoints, and what quota enforcement adds, on an account with
 * 100,000 jobs and 100,000 inferences this month (BENCH_JOBS, BENCH_INFERENCES). The rows are
 * seeded in bulk (INSERT … SELECT generate_series, spread over this month until an hour ago, each
 * job inside one hour so its rollup is a plain GROUP BY): gpu_scheduler.jobs and
 * inference.inferences as the owners keep them, usage.records and usage.hourly as the ledger
 * would have stored them. The run first checks that GET /api/usage counts every seeded row.
 *
 * Two platforms (gateway, auth, gpu-scheduler, inference; each in its own process, sharing the
 * database and the account): "on" also runs the usage service, so job submissions and inferences
 * check the account's quota standing (cached QUOTA_CACHE_MS, default); "off" has no usage service,
 * so nothing monthly is enforced. Passes alternate off/on so drift on a shared machine hits both.
 * Goals: GET /api/usage and /api/quotas p99 ≤ 20 ms; enforcement adds ≤ 5 % to a submit and an inference.
 */
import os from "os";
import { Client } from "pg";
import { OllamaStandin } from "../test/support/provider-standins";
import { ChildService, dropDatabase, freePort, http, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { load, LoadFigures } from "./lib/load";

const JOBS = Number(process.env.BENCH_JOBS || 100_000);
const INFERENCES = Number(process.env.BENCH_INFERENCES || 100_000);
const DURATION_S = Number(process.env.BENCH_DURATION_S || 5);
const WRITES = Number(process.env.BENCH_WRITES || 600); // submits or inferences per pass
const ROUNDS = Number(process.env.BENCH_ROUNDS || 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS || 10);
const SECRET = "bench-secret";

/** The seeded history: jobs (1 or 2 cards, 30 s to 10 min, never across an hour edge) and inferences, evenly over [from, to). */
async function seed(databaseUrl: string, clientId: string, from: Date, to: Date): Promise<{ gpuSeconds: number; tokens: number }> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await db.query("BEGIN");
    await db.query(
      `INSERT INTO gpu_scheduler.jobs (id, client_id, spec, gpu_match, status, gpu_name, gpu_count, exit_code, created_at, started_at, completed_at)
       SELECT gen_random_uuid(), $1, '{"command": "true"}', '', 'completed', 'Bench GPU', 1 + (i % 4 = 0)::int, 0, s, s,
         s + least(interval '1 second' * (30 + i % 570), date_trunc('hour', s) + interval '1 hour' - s)
       FROM (SELECT i, $2::timestamptz + (i * $4::float8) * interval '1 millisecond' AS s FROM generate_series(0, $3::int - 1) i) g`,
      [clientId, from, JOBS, (to.getTime() - from.getTime()) / JOBS],
    );
    await db.query(
      `INSERT INTO inference.inferences (id, client_id, model, provider, prompt_tokens, completion_tokens, tokens_used, duration_ms, outcome, created_at)
       SELECT gen_random_uuid(), $1, CASE WHEN i % 3 = 0 THEN 'qwen2.5:0.5b' ELSE 'llama3.2:1b' END, 'ollama', 20 + i % 50, 5 + i % 200,
         25 + i % 50 + i % 200, 300, 'ok', $2::timestamptz + (i * $4::float8) * interval '1 millisecond'
       FROM generate_series(0, $3::int - 1) i`,
      [clientId, from, INFERENCES, (to.getTime() - from.getTime()) / INFERENCES],
    );
    // The ledger as gpu-scheduler's outbox and inference's batches would have filled it (same keys).
    await db.query(
      `INSERT INTO usage.records (key, client_id, resource, name, started_at, ended_at, amount)
       SELECT 'gpu:' || id || ':1', client_id, 'gpu', gpu_name, started_at, completed_at, gpu_count * extract(epoch FROM completed_at - started_at)
       FROM gpu_scheduler.jobs WHERE client_id = $1
       UNION ALL
       SELECT 'inference:' || id, client_id, 'inference', model, created_at, created_at, tokens_used FROM inference.inferences WHERE client_id = $1`,
      [clientId],
    );
    await db.query(
      `INSERT INTO usage.hourly (client_id, hour, resource, name, amount, events)
       SELECT client_id, date_trunc('hour', started_at), resource, name, sum(amount), count(*) FROM usage.records WHERE client_id = $1 GROUP BY 1, 2, 3, 4`,
      [clientId],
    );
    // What the ledger's statement keeps beside them: the longest record per resource, the platform's totals.
    await db.query(
      `INSERT INTO usage.spans (client_id, resource, longest) SELECT client_id, resource, max(ended_at - started_at) FROM usage.records WHERE client_id = $1 GROUP BY 1, 2`,
      [clientId],
    );
    await db.query(`INSERT INTO usage.totals (resource, name, amount, events) SELECT resource, name, sum(amount), count(*) FROM usage.records GROUP BY 1, 2`);
    await db.query("COMMIT");
    await db.query("ANALYZE gpu_scheduler.jobs; ANALYZE inference.inferences; ANALYZE usage.records; ANALYZE usage.hourly; ANALYZE usage.spans");
    const { rows } = await db.query<{ gpu: number; tokens: number }>(
      `SELECT coalesce(sum(amount) FILTER (WHERE resource = 'gpu'), 0)::float8 AS gpu, coalesce(sum(amount) FILTER (WHERE resource = 'inference'), 0)::float8 AS tokens
       FROM usage.records WHERE client_id = $1`,
      [clientId],
    );
    return { gpuSeconds: rows[0].gpu, tokens: rows[0].tokens };
  } finally {
    await db.end();
  }
}

/** Queued jobs from earlier passes are cancelled, so every submit pass starts from the same queue. */
async function clearQueue(databaseUrl: string): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query("UPDATE gpu_scheduler.jobs SET status = 'cancelled', completed_at = now() WHERE status = 'queued'").finally(() => db.end());
}

const ms = (v: number) => `${v.toFixed(1)} ms`;
const pct = (on: number, off: number) => `${(((on - off) / off) * 100).toFixed(1)} %`;
const avg = (runs: LoadFigures[]): LoadFigures => {
  const m = (k: keyof LoadFigures) => runs.reduce((a, r) => a + r[k], 0) / runs.length;
  return { rps: Math.round(m("rps")), p50: m("p50"), p99: m("p99"), non2xx: m("non2xx") * runs.length, errors: m("errors") * runs.length };
};

async function main() {
  const databaseUrl = testDatabaseUrl();
  const ollama = await new OllamaStandin().start();
  ollama.set({ promptTokens: 20, completionTokens: 10 });
  const children: ChildService[] = [];
  try {
    const common = {
      DATABASE_URL: databaseUrl,
      JWT_SECRET: SECRET,
      TRANSPORTER: "",
      OLLAMA_URL: ollama.url,
      QUOTA_QUEUED_JOBS: "1000000",
      AUTH_RATE_LIMIT_PER_IP: "100000",
      LOG_LEVEL: "warn",
    };
    const start = async (services: string[]) => {
      const port = await freePort();
      children.push(spawnServices(services, { ...common, PORT: String(port), NAMESPACE: uniqueName("bench") }));
      const base = `http://127.0.0.1:${port}`;
      for (const route of ["/api/models/health", "/api/gpu/status"])
        await waitFor(async () => [200, 401].includes((await http(base, "GET", route).catch(() => ({ status: 0 }))).status), {
          timeoutMs: 60_000,
          intervalMs: 200,
          message: `${route} on ${services.join(",")}`,
        });
      return base;
    };
    // One after the other: each runs its services' migrations on the shared database.
    const on = await start(["api-gateway", "auth", "gpu-scheduler", "inference", "usage"]);
    await waitFor(async () => (await http(on, "GET", "/api/quotas")).status === 401, { timeoutMs: 60_000, intervalMs: 200, message: "the usage routes" });
    const off = await start(["api-gateway", "auth", "gpu-scheduler", "inference"]);
    const reg = await http(on, "POST", "/api/auth/register", {
      body: { email: `${uniqueName("bench")}@example.com`, name: "Bench", password: "password-123" },
    });
    const token: string = reg.body.accessToken;
    const auth = { authorization: `Bearer ${token}` };

    const now = new Date();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const seedEnd = new Date(Math.max(monthStart.getTime() + 60_000, now.getTime() - 3600_000));
    const seeded = await seed(databaseUrl, reg.body.client.id, monthStart, seedEnd);
    // The endpoint counts every seeded row (a bench of a wrong answer measures nothing).
    const month = (await http(on, "GET", "/api/usage", { token })).body;
    const exact = month.gpu.jobs === JOBS && month.inference.requests === INFERENCES && month.inference.tokens === seeded.tokens;
    if (!exact || Math.abs(month.gpu.gpuSeconds - seeded.gpuSeconds) > 0.01)
      throw new Error(`GET /api/usage disagrees with the seed: ${JSON.stringify(month)} vs ${JSON.stringify(seeded)}`);

    // A window cutting hours at both ends (odd seconds), inside the seeded span.
    const span = seedEnd.getTime() - monthStart.getTime();
    const cutFrom = new Date(monthStart.getTime() + Math.floor(span * 0.13) + 1_234_567).toISOString();
    const cutTo = new Date(monthStart.getTime() + Math.floor(span * 0.87) + 2_345_678).toISOString();
    const reads: Array<[string, string]> = [
      ["GET /api/usage (this month)", "/api/usage"],
      ["GET /api/usage (a window cutting hours)", `/api/usage?from=${encodeURIComponent(cutFrom)}&to=${encodeURIComponent(cutTo)}`],
      ["GET /api/quotas", "/api/quotas"],
    ];
    const readFigures: Array<[string, number, LoadFigures]> = [];
    for (const [label, path] of reads) {
      await load(`${on}${path}`, { headers: auth, connections: 1, durationS: 1 }); // warm-up: JIT, pools, plans
      for (const connections of [1, CONNECTIONS])
        readFigures.push([label, connections, await load(`${on}${path}`, { headers: auth, connections, durationS: DURATION_S })]);
    }

    const json = { ...auth, "content-type": "application/json" };
    const submit = (base: string) =>
      load(`${base}/api/gpu/jobs`, { method: "POST", headers: json, body: JSON.stringify({ command: "true" }), connections: CONNECTIONS, amount: WRITES });
    const infer = (base: string) =>
      load(`${base}/api/models/infer`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ model: "llama3.2:1b", prompt: "hi" }),
        connections: CONNECTIONS,
        amount: WRITES,
      });
    const writes: Array<[string, (base: string) => Promise<LoadFigures>]> = [
      ["job submit (POST /api/gpu/jobs)", submit],
      ["inference (POST /api/models/infer, instant answers)", infer],
    ];
    const writeFigures: Array<[string, LoadFigures, LoadFigures]> = [];
    for (const [label, pass] of writes) {
      await clearQueue(databaseUrl);
      await pass(off);
      await pass(on); // warm-up of both
      const offRuns: LoadFigures[] = [];
      const onRuns: LoadFigures[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        for (const [base, runs] of (r % 2
          ? [
              [on, onRuns],
              [off, offRuns],
            ]
          : [
              [off, offRuns],
              [on, onRuns],
            ]) as Array<[string, LoadFigures[]]>) {
          await clearQueue(databaseUrl);
          runs.push(await pass(base));
        }
      }
      writeFigures.push([label, avg(offRuns), avg(onRuns)]);
    }

    console.log(
      `\nbench:usage — an account with ${JOBS} jobs and ${INFERENCES} inferences this month; gateway and services in one process per platform; ${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)} at the end`,
    );
    console.log("| endpoint | connections | p50 | p99 | req/s | non-2xx |");
    console.log("|---|---|---|---|---|---|");
    for (const [label, connections, f] of readFigures) console.log(`| ${label} | ${connections} | ${ms(f.p50)} | ${ms(f.p99)} | ${f.rps} | ${f.non2xx} |`);
    console.log(`\nQuota enforcement: ${ROUNDS} alternated passes of ${WRITES} requests each at ${CONNECTIONS} connections, mean of the passes`);
    console.log("| request | enforcement | p50 | p99 | req/s | non-2xx | added p50 | added p99 | req/s lost |");
    console.log("|---|---|---|---|---|---|---|---|---|");
    for (const [label, o, n] of writeFigures) {
      console.log(`| ${label} | off | ${ms(o.p50)} | ${ms(o.p99)} | ${o.rps} | ${o.non2xx} | | | |`);
      console.log(
        `| | on | ${ms(n.p50)} | ${ms(n.p99)} | ${n.rps} | ${n.non2xx} | ${pct(n.p50, o.p50)} | ${pct(n.p99, o.p99)} | ${(((o.rps - n.rps) / o.rps) * 100).toFixed(1)} % |`,
      );
    }
    const worstRead = Math.max(...readFigures.filter(([, c]) => c === 1).map(([, , f]) => f.p99));
    const worstAdded = Math.max(...writeFigures.map(([, o, n]) => (n.p50 - o.p50) / o.p50));
    console.log(`\nGoals: usage/quotas p99 ≤ 20 ms (one connection): ${worstRead <= 20 ? "met" : "NOT met"} (worst ${ms(worstRead)});`);
    console.log(`enforcement adds ≤ 5 % (p50): ${worstAdded <= 0.05 ? "met" : "NOT met"} (worst ${(worstAdded * 100).toFixed(1)} %)`);
  } finally {
    for (const c of children) await c.stop();
    await ollama.stop();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
