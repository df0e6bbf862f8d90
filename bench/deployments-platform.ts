/**
 * bench:deployments' setup: the platform as it runs with a GPU host — gateway, auth, gpu-scheduler
 * and inference in one process, a gpu-node (process executor, bubblewrap sandbox, simulated cards)
 * in another, over NATS — and the tests' OpenAI-compatible replica server
 * (test/fixtures/deployments) both as a deployment's command and on the host, called directly.
 */
import { ChildProcess, spawn } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import readline from "readline";
import { ChildService, freePort, http as call, NATS_URL, spawnServices, uniqueName, waitFor } from "../test/support/platform";
import { replicaCommand } from "../test/fixtures/deployments/replica";
import { procStatTicks } from "./lib/job-cost";

/** Where the replica listens inside its job. */
export const REPLICA_PORT = 8000;

/** `pids`: the gateway's process (gateway, auth, gpu-scheduler, inference) and the gpu-node's. */
export type BenchPlatform = { port: number; base: string; jwt: string; pids: { gateway?: number; node?: number }; stop(): Promise<void> };

/** BENCH_CPU_PROF=<dir>: both processes write a V8 CPU profile there when they stop (node --cpu-prof). */
const profileArgs = () => (process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []);

/**
 * Starts both processes (NAMESPACE of their own on the NATS at NATS_URL) with `cards` simulated
 * cards (`env`: more settings of the first), registers an account and waits until its cards are announced.
 */
export async function startPlatform(databaseUrl: string, cards: number, env: Record<string, string> = {}): Promise<BenchPlatform> {
  const port = await freePort();
  const common = { NAMESPACE: uniqueName("bench"), TRANSPORTER: NATS_URL, DATABASE_URL: databaseUrl, LOG_LEVEL: "warn" };
  const children: ChildService[] = [];
  const stop = async () => {
    for (const child of children.reverse()) await child.stop();
  };
  try {
    children.push(
      spawnServices(["api-gateway", "auth", "gpu-scheduler", "inference"], { ...common, PORT: String(port), OLLAMA_URL: "off", ...env }, profileArgs()),
    );
    children.push(
      spawnServices(
        ["gpu-node"],
        {
          ...common,
          GPU_EXECUTOR: "process",
          GPU_SIMULATE: Array.from({ length: cards }, () => "Bench GPU:1024").join(","),
          GPU_JOB_LOG_DIR: path.join(os.tmpdir(), uniqueName("bench-deployments-logs")),
          // The direct serve channel (services/gpu-node/serve-direct.ts); BENCH_SERVE_DIRECT=off: over the bus only.
          GPU_SERVE_LISTEN: process.env.BENCH_SERVE_DIRECT === "off" ? "" : "127.0.0.1:0",
        },
        profileArgs(),
      ),
    );
    const base = `http://127.0.0.1:${port}`;
    const jwt = await waitFor(
      async () => {
        const reg = await call(base, "POST", "/api/auth/register", {
          body: { email: `${uniqueName("bench")}@example.com`, name: "Bench", password: "password-123" },
        }).catch(() => undefined);
        return reg?.status === 201 ? (reg.body.accessToken as string) : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 300, message: "a registered account" },
    );
    await waitFor(async () => (await call(base, "GET", "/api/gpu/status", { token: jwt })).body?.cluster?.totalGpus === cards, {
      timeoutMs: 60_000,
      intervalMs: 300,
      message: `${cards} cards announced`,
    });
    return { port, base, jwt, pids: { gateway: children[0].proc.pid, node: children[1].proc.pid }, stop };
  } catch (err) {
    for (const child of children) if (child.output()) console.error(child.output().slice(-2000));
    await stop();
    throw err;
  }
}

/** Creates a deployment of the replica server (`tag` names its model) and returns its id. */
export async function createDeployment(p: BenchPlatform, name: string, replicas: { min: number; max: number }): Promise<string> {
  const res = await call(p.base, "POST", "/api/deployments", {
    token: p.jwt,
    body: { name, command: replicaCommand(REPLICA_PORT, { REPLICA_TAG: name }), port: REPLICA_PORT, minReplicas: replicas.min, maxReplicas: replicas.max },
  });
  if (res.status !== 201) throw new Error(`POST /api/deployments: ${res.status} ${res.text}`);
  return res.body.id as string;
}

/** Waits until `ready` replicas of the deployment answer its readiness probe. */
export function waitReady(p: BenchPlatform, id: string, ready: number): Promise<unknown> {
  return waitFor(async () => (await call(p.base, "GET", `/api/deployments/${id}`, { token: p.jwt })).body?.replicas?.ready === ready, {
    timeoutMs: 60_000,
    intervalMs: 200,
    message: `${ready} replica(s) ready`,
  });
}

/** Deletes a deployment and waits (bounded) until its replicas' cards are free again. */
export async function deleteDeployment(p: BenchPlatform, id: string): Promise<void> {
  await call(p.base, "DELETE", `/api/deployments/${id}`, { token: p.jwt });
  await waitFor(
    async () => {
      const jobs = (await call(p.base, "GET", `/api/gpu/jobs?deploymentId=${id}`, { token: p.jwt })).body?.jobs ?? [];
      return jobs.every((j: { status: string }) => ["completed", "failed", "cancelled"].includes(j.status));
    },
    { timeoutMs: 30_000, intervalMs: 200, message: "the replicas stopped" },
  ).catch(() => undefined);
}

export type HostReplica = { port: number; proc: ChildProcess; startMs: number };

/**
 * The same replica server on the host, started with the same shell command a replica runs;
 * resolves when it prints that it listens, with the ms from spawn to that line (its own start).
 */
export async function startHostReplica(tag: string): Promise<HostReplica> {
  const port = await freePort();
  const started = process.hrtime.bigint();
  const proc = spawn("sh", ["-c", replicaCommand(port, { REPLICA_TAG: tag })], { stdio: ["ignore", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: proc.stdout! });
  return new Promise((resolve, reject) => {
    proc.once("exit", (code) => reject(new Error(`the host replica exited (${code})`)));
    lines.once("line", () => resolve({ port, proc, startMs: Number(process.hrtime.bigint() - started) / 1e6 }));
  });
}

/** Stops a host replica and waits for it to exit. */
export function stopHostReplica(r: HostReplica): Promise<void> {
  if (r.proc.exitCode !== null || r.proc.signalCode !== null) return Promise.resolve();
  r.proc.removeAllListeners("exit");
  const exited = new Promise<void>((resolve) => r.proc.once("exit", () => resolve()));
  r.proc.kill();
  return exited;
}

/**
 * The pids of the serve forwarders (services/gpu-node/relay-forwarder.ts: the program that pipes
 * the node's connections to the replica's port inside each replica's sandbox) under `nodePid`: the
 * deployment path's third process, whose CPU the gpu-node's own figure leaves out.
 */
export function forwarderPids(nodePid: number): number[] {
  const procs = new Map<number, { ppid: number; forwarder: boolean }>();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const { ppid } = procStatTicks(fs.readFileSync(`/proc/${entry}/stat`, "utf8"));
      procs.set(Number(entry), { ppid, forwarder: fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("ci-platform relay") });
    } catch {
      // gone meanwhile
    }
  }
  const under = (pid: number): boolean => {
    for (let at = procs.get(pid)?.ppid, hops = 0; at && hops < 16; at = procs.get(at)?.ppid, hops++) if (at === nodePid) return true;
    return false;
  };
  return [...procs].filter(([pid, p]) => p.forwarder && under(pid)).map(([pid]) => pid);
}
