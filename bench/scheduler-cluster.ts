/**
 * The simulated cluster of bench:scheduler: gateway + auth + gpu-scheduler in one process, the
 * gpu-node brokers spread over BENCH_NODE_PROCESSES hosts (bench/scheduler-nodes.ts: real gpu-node
 * service, no-op executor), over plain NATS or its own authenticated (TLS) bus; an HTTP client per
 * account and a PostgreSQL connection to read the job timestamps.
 */
import { ChildProcess, spawn } from "child_process";
import { mkdtempSync, rmSync } from "fs";
import { connect } from "nats";
import os from "os";
import path from "path";
import { Client } from "pg";
import { BusServer, startBusServer } from "../test/support/bus-server";
import { dropDatabase, freePort, NATS_URL, ROOT, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { JobCostMeter, jobsInProgress, PROBE_ARGS } from "./lib/job-cost-meter";
import { type Call, jsonClient } from "./lib/json-client";

/** plain NATS; authenticated + permissioned without TLS; the same with TLS. */
export type BusMode = "plain" | "auth" | "secure";
export const CARDS_PER_NODE = 8;
export const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 64);

export const now = () => performance.timeOrigin + performance.now();
export const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
export const fmt = (n: number, digits = 1) => n.toFixed(digits);
export const verdict = (ok: boolean) => (ok ? "meets the goal" : "misses the goal");

export type { Call } from "./lib/json-client";
/** A keep-alive JSON client; one socket per concurrent request. */
export const client = (base: string, token: string): Call => jsonClient(base, token, CONCURRENCY);

/**
 * Runs a TypeScript entry point with the job-cost probe (bench/lib/job-cost-probe.ts);
 * BENCH_PROFILE_DIR=<dir> writes a CPU profile of it on exit.
 */
function spawnTs(script: string, env: Record<string, string>, readyLine?: string): ChildProcess & { ready: Promise<void>; output(): string } {
  const profile = process.env.BENCH_PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  const proc = spawn(process.execPath, [...profile, "--import", "tsx", ...PROBE_ARGS, path.join(ROOT, script)], {
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

export type Cluster = {
  nodes: number;
  databaseUrl: string;
  db: Client;
  /** The per-job cost budget of the platform's processes (bench/lib/job-cost-meter.ts). */
  meter: JobCostMeter;
  /** Registers an account; its HTTP client. */
  account(name: string): Promise<Call>;
  stop(): Promise<void>;
};

/** Starts the platform and `nodes` simulated gpu-nodes; resolves once every card is announced. */
export async function startCluster(mode: BusMode, nodes: number, platformEnv: Record<string, string>): Promise<Cluster> {
  const started = Date.now();
  const databaseUrl = testDatabaseUrl();
  const namespace = uniqueName("bsched");
  const logDir = mkdtempSync(path.join(os.tmpdir(), "bench-sched-"));
  const nodeProcesses = Number(process.env.BENCH_NODE_PROCESSES || 2);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const perHost = Math.ceil(nodes / nodeProcesses);
  const nodeNames = Array.from({ length: nodes }, (_, i) => `${namespace}-node-${String(i).padStart(3, "0")}`);
  let bus: BusServer | undefined;
  if (mode !== "plain") bus = await startBusServer({ namespace, gpuNodes: nodeNames, tls: mode === "secure", maxPayload: "8MB" });
  const tlsCa: Record<string, string> = bus?.certificates ? { NATS_TLS_CA: bus.certificates.caFile } : {};
  // Secure: the platform process (several services) is the "core" user; each gpu-node its own.
  const busEnv: Record<string, string> = bus ? { TRANSPORTER: bus.urlFor("core"), ...tlsCa } : { TRANSPORTER: NATS_URL };
  const nodeBusEnv: Record<string, string> = bus ? { TRANSPORTER: bus.url, ...tlsCa, BENCH_NODE_PASSWORDS: JSON.stringify(bus.passwords) } : {};
  const children: ChildProcess[] = [];
  const db = new Client({ connectionString: databaseUrl });
  const meter = new JobCostMeter(db, () => ({
    "gateway+auth+scheduler": children.slice(0, 1).map((p) => p.pid!),
    "gpu-nodes": children.slice(1).map((p) => p.pid!),
  }));
  const common = {
    ...busEnv,
    NAMESPACE: namespace,
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: "warn",
    HEALTH_PORT: "off",
    METRICS_PORT: "off",
    JWT_SECRET: "bench-secret",
    BENCH_JOB_COST_DIR: meter.dir,
    AUTH_RATE_LIMIT_PER_IP: "100000",
    AUTH_RATE_LIMIT_PER_EMAIL: "100000",
  };
  const stop = async () => {
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
    meter.close();
  };
  try {
    const busName = { plain: "plain NATS", auth: "the authenticated, permissioned bus (no TLS)", secure: "the authenticated, permissioned TLS bus" }[mode];
    console.log(`bench:scheduler — ${nodes} gpu-nodes × ${CARDS_PER_NODE} cards in ${nodeProcesses} processes, over ${busName}; ${os.cpus().length} CPU cores`);
    const platform = spawnTs("index.ts", {
      ...common,
      SERVICES: "api-gateway,auth,gpu-scheduler",
      PORT: String(port),
      NODE_ID: `${namespace}-platform`,
      ...platformEnv,
    });
    children.push(platform);
    const hosts = Array.from({ length: nodeProcesses }, (_, h) =>
      spawnTs(
        "bench/scheduler-nodes.ts",
        {
          ...common,
          ...nodeBusEnv,
          NODES_PREFIX: `${namespace}-node`,
          NODES_FROM: String(h * perHost),
          NODES_COUNT: String(Math.max(0, Math.min(perHost, nodes - h * perHost))),
          GPU_SIMULATE: Array.from({ length: CARDS_PER_NODE }, () => "NVIDIA H100 80GB HBM3:81920").join(","),
          GPU_JOB_LOG_DIR: logDir,
        },
        "ready",
      ),
    );
    children.push(...hosts);
    await Promise.all(hosts.map((h) => h.ready));
    const account = async (name: string) => {
      const email = `${namespace}-${name}@example.com`;
      const reg = await waitFor(
        async () => {
          if (platform.exitCode !== null) throw new Error(platform.output());
          const res = await client(base, "")("POST", "/api/auth/register", { email, name: "Bench", password: "bench-password" }).catch(() => undefined);
          return res?.status === 201 ? res : false;
        },
        { timeoutMs: 60_000, message: "the gateway to answer" },
      );
      return client(base, reg.body.accessToken);
    };
    const first = await account("first");
    await waitFor(async () => (await first("GET", "/api/gpu/status")).body?.cluster?.totalGpus === nodes * CARDS_PER_NODE, {
      timeoutMs: 60_000,
      message: `${nodes * CARDS_PER_NODE} cards announced`,
    });
    await db.connect();
    console.log(`cluster up in ${fmt((Date.now() - started) / 1000)} s\n`);
    return { nodes, databaseUrl, db, meter, account, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The jobs, queued or archived (the bench's columns only). */
const ALL_JOBS = `(SELECT id, client_id, status, created_at, assigned_at, started_at, completed_at FROM gpu_scheduler.jobs
  UNION ALL SELECT id, client_id, status, created_at, assigned_at, started_at, completed_at FROM gpu_scheduler.jobs_history) j`;

/** Resolves once every job of `ids` completed; throws if one failed or was cancelled. */
export const completed = (db: Client, ids: string[], timeoutMs = 120_000) =>
  waitFor(
    async () => {
      const { rows } = await db.query<{ n: number; bad: number }>(
        `SELECT count(*) FILTER (WHERE status = 'completed')::int AS n, count(*) FILTER (WHERE status IN ('failed', 'cancelled'))::int AS bad
         FROM ${ALL_JOBS} WHERE id = ANY($1::uuid[])`,
        [ids],
      );
      if (rows[0].bad) throw new Error(`${rows[0].bad} jobs did not complete`);
      return rows[0].n === ids.length;
    },
    { timeoutMs, intervalMs: 100, message: `${ids.length} jobs completed` },
  );

/** Resolves once no job is queued, placed or running. */
export const drained = (db: Client) =>
  waitFor(async () => (await jobsInProgress(db)) === 0, { timeoutMs: 300_000, intervalMs: 100, message: "every job ended" });

/** The jobs' timestamps in epoch milliseconds. */
export const times = async (db: Client, ids: string[]) =>
  (
    await db.query<{ id: string; client_id: string; created: number; assigned: number; started: number; completed: number }>(
      `SELECT id, client_id, extract(epoch FROM created_at) * 1000 AS created, extract(epoch FROM assigned_at) * 1000 AS assigned,
              extract(epoch FROM started_at) * 1000 AS started, extract(epoch FROM completed_at) * 1000 AS completed
       FROM ${ALL_JOBS} WHERE id = ANY($1::uuid[])`,
      [ids],
    )
  ).rows;
