/**
 * bench:scheduler — a simulated cluster of 100 gpu-nodes × 8 cards over real NATS, jobs submitted
 * through the HTTP gateway:
 * - latency: POST → running on an idle card (one job at a time), p50 / p99; goals ≤ 15 / ≤ 50 ms;
 * - throughput: jobs from first submit to last completed, at 64 concurrent clients; goal
 *   ≥ 1,000 jobs/s (Slurm publishes 500/s).
 * Processes: gateway + auth + gpu-scheduler in one, the gpu-node brokers spread over
 * BENCH_NODE_PROCESSES hosts (bench/scheduler-nodes.ts: real gpu-node service, no-op executor),
 * this one drives HTTP and reads the job timestamps from PostgreSQL. BENCH_BUS unset (default)
 * runs it on the shared plain NATS, then on the authenticated, permissioned bus without and with
 * TLS (its own nats-server, a user per gpu-node), and prints the cost of bus security (goal:
 * ≤ 10 % loss); `plain`, `auth` or `secure` runs one. Then, if present, the Docker executor's start overhead against a
 * bare `docker run` (bench/docker-executor.bench.ts).
 */
import { ChildProcess, spawn } from "child_process";
import { existsSync, mkdtempSync, rmSync } from "fs";
import http from "http";
import { connect } from "nats";
import os from "os";
import path from "path";
import { Client } from "pg";
import { BusServer, startBusServer } from "../test/support/bus-server";
import { dropDatabase, freePort, NATS_URL, ROOT, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";

/** plain NATS; authenticated + permissioned without TLS; the same with TLS. */
type BusMode = "plain" | "auth" | "secure";
const ALL_MODES: BusMode[] = ["plain", "auth", "secure"];
const BUS_MODES: BusMode[] = ALL_MODES.includes(process.env.BENCH_BUS as BusMode) ? [process.env.BENCH_BUS as BusMode] : ALL_MODES;
// Two runs in one: half the jobs each by default, so the whole stays about a minute.
const SCALE = BUS_MODES.length === 2 ? 0.5 : 1;
const NODES = Number(process.env.BENCH_NODES || 100);
const CARDS_PER_NODE = 8;
const NODE_PROCESSES = Number(process.env.BENCH_NODE_PROCESSES || 2);
const LATENCY_JOBS = Number(process.env.BENCH_LATENCY_JOBS || 300 * SCALE);
const THROUGHPUT_JOBS = Number(process.env.BENCH_JOBS || 10_000 * SCALE);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 64);
const GOALS = { jobsPerS: 1000, p50Ms: 15, p99Ms: 50 };

const now = () => performance.timeOrigin + performance.now();
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const fmt = (n: number, digits = 1) => n.toFixed(digits);

/** A keep-alive JSON client; one socket per concurrent request. */
function client(base: string, token: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const url = new URL(base);
  return (method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: any }> =>
    new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = http.request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method,
          path: urlPath,
          headers: { authorization: `Bearer ${token}`, ...(data ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) } : {}) },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c) => (text += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
        },
      );
      req.on("error", reject);
      req.end(data);
    });
}

/** Runs a TypeScript entry point; BENCH_PROFILE_DIR=<dir> writes a CPU profile of it on exit. */
function spawnTs(script: string, env: Record<string, string>, readyLine?: string): ChildProcess & { ready: Promise<void>; output(): string } {
  const profile = process.env.BENCH_PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  const proc = spawn(process.execPath, [...profile, "--import", "tsx", path.join(ROOT, script)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  }) as ChildProcess & { ready: Promise<void>; output(): string };
  let output = "";
  proc.output = () => output;
  proc.ready = new Promise((resolve, reject) => {
    proc.stdout!.on("data", (d) => {
      output += d;
      if (readyLine && output.includes(readyLine)) resolve();
    });
    proc.stderr!.on("data", (d) => (output += d));
    proc.once("exit", (code) => reject(new Error(`${script} exited (${code}):\n${output.slice(-2000)}`)));
    if (!readyLine) resolve();
  });
  return proc;
}

type Figures = { p50: number; p99: number; jobsPerS: number };

async function runCluster(mode: BusMode): Promise<Figures> {
  const started = Date.now();
  const databaseUrl = testDatabaseUrl();
  const namespace = uniqueName("bsched");
  const logDir = mkdtempSync(path.join(os.tmpdir(), "bench-sched-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const perHost = Math.ceil(NODES / NODE_PROCESSES);
  const nodeNames = Array.from({ length: NODES }, (_, i) => `${namespace}-node-${String(i).padStart(3, "0")}`);
  let bus: BusServer | undefined;
  if (mode !== "plain") bus = await startBusServer({ namespace, gpuNodes: nodeNames, tls: mode === "secure", maxPayload: "8MB" });
  const tlsCa: Record<string, string> = bus?.certificates ? { NATS_TLS_CA: bus.certificates.caFile } : {};
  // Secure: the platform process (several services) is the "core" user; each gpu-node its own.
  const busEnv: Record<string, string> = bus ? { TRANSPORTER: bus.urlFor("core"), ...tlsCa } : { TRANSPORTER: NATS_URL };
  const nodeBusEnv: Record<string, string> = bus ? { TRANSPORTER: bus.url, ...tlsCa, BENCH_NODE_PASSWORDS: JSON.stringify(bus.passwords) } : {};
  let figures: Figures | undefined;
  const common = {
    ...busEnv,
    NAMESPACE: namespace,
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: "warn",
    HEALTH_PORT: "off",
    METRICS_PORT: "off",
    JWT_SECRET: "bench-secret",
    AUTH_RATE_LIMIT_PER_IP: "100000",
    AUTH_RATE_LIMIT_PER_EMAIL: "100000",
  };
  const children: ChildProcess[] = [];
  const db = new Client({ connectionString: databaseUrl });

  try {
    const busName = { plain: "plain NATS", auth: "the authenticated, permissioned bus (no TLS)", secure: "the authenticated, permissioned TLS bus" }[mode];
    console.log(
      `bench:scheduler — ${NODES} gpu-nodes × ${CARDS_PER_NODE} cards in ${NODE_PROCESSES} processes, over ${busName}; ${os.cpus().length} CPU cores`,
    );
    const platform = spawnTs("index.ts", {
      ...common,
      SERVICES: "api-gateway,auth,gpu-scheduler",
      // One account submits the whole run: throughput is measured here, not the per-account queue cap.
      QUOTA_QUEUED_JOBS: "1000000",
      PORT: String(port),
      NODE_ID: `${namespace}-platform`,
    });
    children.push(platform);
    const hosts = Array.from({ length: NODE_PROCESSES }, (_, h) =>
      spawnTs(
        "bench/scheduler-nodes.ts",
        {
          ...common,
          ...nodeBusEnv,
          NODES_PREFIX: `${namespace}-node`,
          NODES_FROM: String(h * perHost),
          NODES_COUNT: String(Math.max(0, Math.min(perHost, NODES - h * perHost))),
          GPU_SIMULATE: Array.from({ length: CARDS_PER_NODE }, () => "NVIDIA H100 80GB HBM3:81920").join(","),
          GPU_JOB_LOG_DIR: logDir,
        },
        "ready",
      ),
    );
    children.push(...hosts);
    await Promise.all(hosts.map((h) => h.ready));

    const email = `${namespace}@example.com`;
    const reg = await waitFor(
      async () => {
        if (platform.exitCode !== null) throw new Error(platform.output());
        const res = await client(base, "")("POST", "/api/auth/register", { email, name: "Bench", password: "bench-password" }).catch(() => undefined);
        return res?.status === 201 ? res : false;
      },
      { timeoutMs: 60_000, message: "the gateway to answer" },
    );
    const call = client(base, reg.body.accessToken);
    await waitFor(async () => (await call("GET", "/api/gpu/status")).body?.cluster?.totalGpus === NODES * CARDS_PER_NODE, {
      timeoutMs: 60_000,
      message: `${NODES * CARDS_PER_NODE} cards announced`,
    });
    await db.connect();
    console.log(`cluster up in ${fmt((Date.now() - started) / 1000)} s\n`);

    const submit = async (sent: Map<string, number>) => {
      const t0 = now();
      const res = await call("POST", "/api/gpu/jobs", { command: "true" });
      if (res.status !== 201) throw new Error(`POST /api/gpu/jobs: ${res.status} ${JSON.stringify(res.body)}`);
      sent.set(res.body.id, t0);
      return now() - t0;
    };
    const completed = (ids: string[]) =>
      waitFor(
        async () => {
          const { rows } = await db.query<{ n: number; bad: number }>(
            `SELECT count(*) FILTER (WHERE status = 'completed')::int AS n, count(*) FILTER (WHERE status IN ('failed', 'cancelled'))::int AS bad
             FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[])`,
            [ids],
          );
          if (rows[0].bad) throw new Error(`${rows[0].bad} jobs did not complete`);
          return rows[0].n === ids.length;
        },
        { timeoutMs: 120_000, intervalMs: 100, message: `${ids.length} jobs completed` },
      );
    const times = async (ids: string[]) =>
      (
        await db.query<{ id: string; created: number; assigned: number; started: number; completed: number }>(
          `SELECT id, extract(epoch FROM created_at) * 1000 AS created, extract(epoch FROM assigned_at) * 1000 AS assigned,
                  extract(epoch FROM started_at) * 1000 AS started, extract(epoch FROM completed_at) * 1000 AS completed
           FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[])`,
          [ids],
        )
      ).rows;

    // Warm-up: connections, JIT, prepared paths.
    const warm = new Map<string, number>();
    await Promise.all(Array.from({ length: 200 }, () => submit(warm)));
    await completed([...warm.keys()]);

    // 1. Latency on an idle cluster: one job at a time.
    const lat = new Map<string, number>();
    const postMs: number[] = [];
    for (let i = 0; i < LATENCY_JOBS; i++) postMs.push(await submit(lat));
    await completed([...lat.keys()]);
    const latRows = await times([...lat.keys()]);
    const toRunning = latRows.map((r) => r.started - lat.get(r.id)!).sort((a, b) => a - b);
    const median = (f: (r: (typeof latRows)[number]) => number) =>
      quantile(
        latRows.map(f).sort((a, b) => a - b),
        0.5,
      );
    const stages = {
      insert: median((r) => r.created - lat.get(r.id)!),
      place: median((r) => r.assigned - r.created),
      dispatch: median((r) => r.started - r.assigned),
    };
    postMs.sort((a, b) => a - b);

    // 2. Throughput: CONCURRENCY clients submitting THROUGHPUT_JOBS no-op jobs.
    const pgStats = async () =>
      (
        await db.query<{ xacts: string; rows: string }>(
          `SELECT xact_commit + xact_rollback AS xacts, tup_returned + tup_fetched AS rows FROM pg_stat_database WHERE datname = current_database()`,
        )
      ).rows[0];
    const pgBefore = await pgStats();
    const thr = new Map<string, number>();
    let next = 0;
    const first = now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next++ < THROUGHPUT_JOBS) await submit(thr);
      }),
    );
    const submittedMs = now() - first;
    await completed([...thr.keys()]);
    // Statistics reach pg_stat_database when a backend reports them (at most every 0.5 s idle).
    await new Promise((r) => setTimeout(r, 1000));
    const pgAfter = await pgStats();
    const rows = await times([...thr.keys()]);
    const lastCompleted = Math.max(...rows.map((r) => r.completed));
    const spanS = (lastCompleted - first) / 1000;
    const jobsPerS = THROUGHPUT_JOBS / spanS;
    const lifetime = rows.map((r) => r.completed - r.created).sort((a, b) => a - b);

    const p50 = quantile(toRunning, 0.5);
    const p99 = quantile(toRunning, 0.99);
    const verdict = (ok: boolean) => (ok ? "meets the goal" : "misses the goal");
    console.log(`POST → running on an idle card (${LATENCY_JOBS} jobs, one at a time)`);
    console.log(`  p50 ${fmt(p50)} ms (goal ≤ ${GOALS.p50Ms}: ${verdict(p50 <= GOALS.p50Ms)}, ${fmt(p50 / GOALS.p50Ms, 2)}× the goal)`);
    console.log(`  p99 ${fmt(p99)} ms (goal ≤ ${GOALS.p99Ms}: ${verdict(p99 <= GOALS.p99Ms)}, ${fmt(p99 / GOALS.p99Ms, 2)}× the goal)`);
    console.log(`  HTTP answer to the POST: p50 ${fmt(quantile(postMs, 0.5))} ms, p99 ${fmt(quantile(postMs, 0.99))} ms`);
    console.log(
      `  medians by stage: POST sent → stored ${fmt(stages.insert)} ms, stored → placed ${fmt(stages.place)} ms, placed → running (gpu-node.run and back) ${fmt(stages.dispatch)} ms\n`,
    );
    console.log(`Throughput (${THROUGHPUT_JOBS} no-op jobs, ${CONCURRENCY} concurrent clients)`);
    console.log(
      `  ${fmt(jobsPerS, 0)} jobs/s from first submit to last completed (goal ≥ ${GOALS.jobsPerS}: ${verdict(jobsPerS >= GOALS.jobsPerS)}; ${fmt(jobsPerS / 500, 2)}× Slurm's 500/s)`,
    );
    console.log(
      `  submitting alone: ${fmt(THROUGHPUT_JOBS / (submittedMs / 1000), 0)} jobs/s; created → completed per job: p50 ${fmt(quantile(lifetime, 0.5))} ms, p99 ${fmt(quantile(lifetime, 0.99))} ms`,
    );
    console.log(`  every job completed exactly once: ${rows.length === THROUGHPUT_JOBS ? "yes" : "NO"}`);
    const perJob = (a: string, b: string) => fmt((Number(b) - Number(a)) / THROUGHPUT_JOBS, 1);
    console.log(
      `  PostgreSQL per job (all processes): ${perJob(pgBefore.xacts, pgAfter.xacts)} transactions, ${perJob(pgBefore.rows, pgAfter.rows)} rows read\n`,
    );
    figures = { p50, p99, jobsPerS };
  } finally {
    await db.end().catch(() => undefined);
    // SIGTERM first (a clean exit), SIGKILL for what is still there after 5 s.
    await Promise.all(
      children
        .filter((proc) => proc.exitCode === null && proc.signalCode === null)
        .map((proc) => {
          const exited = new Promise((resolve) => proc.once("exit", resolve));
          proc.kill("SIGTERM");
          const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
          return exited.finally(() => clearTimeout(timer));
        }),
    );
    await dropDatabase(databaseUrl).catch(() => undefined);
    if (bus) await bus.stop();
    else {
      const nc = await connect({ servers: new URL(NATS_URL).host });
      const jsm = await nc.jetstreamManager();
      for (const stream of [`${namespace}_gpu_job-events`, `${namespace}_dead-letter`]) await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
    }
    rmSync(logDir, { recursive: true, force: true });
  }
  return figures!;
}

async function main() {
  const started = Date.now();
  const results = new Map<BusMode, Figures>();
  for (const mode of BUS_MODES) results.set(mode, await runCluster(mode));
  const plain = results.get("plain");
  const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)} %`;
  for (const [mode, name] of [
    ["auth", "authenticated, permissioned, no TLS"],
    ["secure", "authenticated, permissioned, TLS"],
  ] as const) {
    const secured = results.get(mode);
    if (!plain || !secured) continue;
    console.log(`Cost of bus security (${name} / plain NATS)`);
    console.log(`  throughput ${fmt(secured.jobsPerS, 0)} / ${fmt(plain.jobsPerS, 0)} jobs/s = ${pct(secured.jobsPerS, plain.jobsPerS)} (goal ≥ 90 %)`);
    console.log(`  POST → running p50 ${fmt(secured.p50)} / ${fmt(plain.p50)} ms, p99 ${fmt(secured.p99)} / ${fmt(plain.p99)} ms\n`);
  }

  const dockerBench = path.join(__dirname, "docker-executor.bench.ts");
  if (existsSync(dockerBench) && process.env.BENCH_SKIP_DOCKER !== "1") {
    console.log("Docker executor start overhead against a bare `docker run` (bench/docker-executor.bench.ts)");
    try {
      const { benchDockerExecutor, printDockerExecutorFigures } = await import(dockerBench);
      printDockerExecutorFigures(await benchDockerExecutor());
    } catch (err) {
      console.log(`  not measured: ${(err as Error).message}`);
    }
  }
  console.log(`\nbench:scheduler done in ${fmt((Date.now() - started) / 1000)} s`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
