/**
 * bench:events — 1,000 concurrent log followers, then 1,000 SSE watchers, on 100 running jobs
 * (the platform in one child process: gateway, auth, scheduler and a gpu-node with 100 simulated
 * cards running sandboxed processes that print a timestamped line a second), then webhook
 * deliveries to a local receiver. Prints: the platform's memory per follower and per watcher
 * (RSS growth / count), latency from a line written in a job to a follower (p50/p99; goal p99 ≤ 1 s),
 * latency from a cancel to the watchers' `cancelled` event, and webhook deliveries per second.
 */
import { readFileSync, mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";
import { followLog, FollowReader } from "../test/support/follow";
import { ChildService, dropDatabase, freePort, http, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { EventStreamReader, openEventStream } from "../test/support/sse";
import { startReceiver } from "../test/support/webhook-receiver";

const JOBS = Number(process.env.BENCH_JOBS || 100);
const CLIENTS = Number(process.env.BENCH_CLIENTS || 1000);
const MEASURE_S = Number(process.env.BENCH_MEASURE_S || 20);
const WEBHOOKS = Number(process.env.BENCH_WEBHOOKS || 300);

const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (n: number) => `${n.toFixed(0)} ms`;
const progress = (line: string) => process.stderr.write(`  … ${line}\n`);
/** The whole run's bound: past it the platform is killed and the bench fails. */
const BOUND_S = Number(process.env.BENCH_BOUND_S || 240);

/** `open(i)` for i < count, `width` at a time. */
async function openAll<T>(count: number, width: number, open: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next++; i < count; i = next++) out[i] = await open(i);
    }),
  );
  return out;
}

async function main() {
  const databaseUrl = testDatabaseUrl();
  const work = mkdtempSync(path.join(os.tmpdir(), "bench-events-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const receiver = await startReceiver((p) => (p === "/closed" ? 503 : 200));
  let platform: ChildService | undefined;
  const open: Array<{ close(): void }> = [];
  try {
    platform = spawnServices(["api-gateway", "auth", "gpu-scheduler", "gpu-node"], {
      PORT: String(port),
      TRANSPORTER: "",
      DATABASE_URL: databaseUrl,
      JWT_SECRET: uniqueName("bench"),
      GPU_EXECUTOR: "process",
      GPU_SIMULATE: Array.from({ length: JOBS }, () => "Bench GPU:1024").join(","),
      GPU_HEARTBEAT_S: "1",
      GPU_SCHEDULE_TICK_MS: "200",
      GPU_STOP_GRACE_S: "1",
      GPU_JOB_LOG_DIR: path.join(work, "logs"),
      WEBHOOK_ALLOW_PRIVATE: "true",
      WEBHOOK_POLL_MS: "100",
      WEBHOOK_RETRY_DELAYS_S: "3600",
      // One account holds every follower and watcher here (the default allows 100 open streams per account).
      GATEWAY_STREAMS_PER_ACCOUNT: String(CLIENTS),
    });
    const pid = platform.proc.pid!;
    const child = platform.proc;
    setTimeout(() => {
      console.error(`bench:events: not done within ${BOUND_S} s`);
      child.kill("SIGKILL");
      process.exit(2);
    }, BOUND_S * 1000).unref();
    let token = "";
    await waitFor(
      async () => {
        if (platform!.proc.exitCode !== null) throw new Error(platform!.output());
        const res = await http(base, "POST", "/api/auth/register", {
          body: { email: `${uniqueName("b")}@example.com`, name: "bench", password: "password-123" },
        }).catch(() => undefined);
        if (res?.status !== 201) return false;
        token = res.body.accessToken;
        return (await http(base, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === JOBS;
      },
      { timeoutMs: 60_000, intervalMs: 250, message: "the platform and its cards" },
    );
    await http(base, "POST", "/api/auth/webhook-secret", { token });

    progress("platform up");
    // 100 jobs, each printing "L <ns since epoch>" every second.
    const command = 'while true; do echo "L $(date +%s%N)"; sleep 1; done';
    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const res = await http(base, "POST", "/api/gpu/jobs", { token, body: { command } });
      if (res.status !== 201) throw new Error(`submit: ${res.status} ${res.text}`);
      ids.push(res.body.id);
    }
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body.cluster.availableGpus === 0, {
      timeoutMs: 60_000,
      message: "every job on a card",
    });
    await waitFor(async () => (await http(base, "GET", "/api/gpu/jobs", { token })).body.jobs.every((j: any) => j.status === "running"), {
      timeoutMs: 60_000,
      message: "jobs running",
    });

    progress("jobs running");
    // 1. followers
    const rss0 = rssKb(pid);
    const latencies: number[] = [];
    let measuring = false;
    const followers: FollowReader[] = await openAll(CLIENTS, 50, async (i) => {
      const log = await followLog(`${base}/api/gpu/jobs/${ids[i % JOBS]}/logs?follow=true`, token);
      open.push(log);
      return log;
    });
    await Promise.all(followers.map((f) => f.until((t) => t.includes("\n"))));
    const rss1 = rssKb(pid);
    progress("followers open");
    // Each follower's new lines: written (the job's clock) → received here (the same host's clock).
    const seen = followers.map((f) => f.text().length);
    const collect = (f: FollowReader, i: number) => {
      const fresh = f.text().slice(seen[i]);
      const end = fresh.lastIndexOf("\n") + 1;
      seen[i] += end;
      if (!measuring) return;
      const now = Date.now();
      for (const m of fresh.slice(0, end).matchAll(/^L (\d+)$/gm)) latencies.push(now - Number(BigInt(m[1]) / 1_000_000n));
    };
    measuring = true;
    const until = Date.now() + MEASURE_S * 1000;
    await Promise.all(
      followers.map(async (f, i) => {
        while (Date.now() < until) {
          await f.until((t) => t.length > seen[i] && t.endsWith("\n"));
          collect(f, i);
        }
      }),
    );
    measuring = false;
    latencies.sort((a, b) => a - b);

    progress("latency measured");
    for (const f of followers) f.close();
    // 2. SSE watchers: memory, then the latency of the `cancelled` event after each cancel.
    const rssClosed = rssKb(pid);
    const watchers: EventStreamReader[] = await openAll(CLIENTS, 50, async (i) => {
      const stream = await openEventStream(`${base}/api/gpu/jobs/${ids[i % JOBS]}/events`, token);
      open.push(stream);
      return stream;
    });
    await Promise.all(watchers.map((w) => w.next()));
    const rss2 = rssKb(pid);
    progress("watchers open");
    const cancelledAt = new Map<string, number>();
    const eventLatencies: number[] = [];
    const watching = watchers.map(async (w, i) => {
      for (let b = await w.next(); b; b = await w.next()) if (b.data?.status === "cancelled") eventLatencies.push(Date.now() - cancelledAt.get(ids[i % JOBS])!);
    });

    // 3. webhook jobs wait in the queue (every card is busy) and are cancelled there; the receiver refuses their first attempts.
    const hooked = await openAll(WEBHOOKS, 20, async () => {
      const res = await http(base, "POST", "/api/gpu/jobs", { token, body: { command: "true", webhookUrl: receiver.url("/closed") } });
      if (res.status !== 201) throw new Error(`submit: ${res.status} ${res.text}`);
      return res.body.id as string;
    });
    await openAll(hooked.length, 20, (i) => http(base, "POST", `/api/gpu/jobs/${hooked[i]}/cancel`, { token }));
    progress("webhook jobs cancelled");
    await waitFor(() => receiver.to("/closed").length >= WEBHOOKS, {
      timeoutMs: 60_000,
      message: `every first attempt refused (${receiver.to("/closed").length} so far)`,
    });
    // All due at once, to an accepting path: the sender's drain rate.
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    const started = Date.now();
    await db.query(`UPDATE gpu_scheduler.webhook_deliveries SET url = replace(url, '/closed', '/open'), next_attempt_at = now() WHERE status = 'pending'`);
    await db.end();
    await waitFor(() => receiver.to("/open").length >= WEBHOOKS, { timeoutMs: 120_000, intervalMs: 5, message: "every webhook delivered" });
    const deliverS = (Date.now() - started) / 1000;

    for (const id of ids) {
      cancelledAt.set(id, Date.now());
      void http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token }).catch(() => undefined);
    }
    await Promise.all(watching);
    eventLatencies.sort((a, b) => a - b);
    progress("cancelled events received");
    console.log(`bench:events — ${JOBS} running jobs (sandboxed processes, a line a second each), platform in one process`);
    console.log(`  followers: ${CLIENTS}; platform RSS +${((rss1 - rss0) / 1024).toFixed(1)} MiB → ${((rss1 - rss0) / CLIENTS).toFixed(1)} KiB per follower`);
    console.log(
      `  line written → follower: ${latencies.length} lines in ${MEASURE_S} s; p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}, max ${ms(latencies.at(-1)!)} (goal p99 ≤ 1000 ms)`,
    );
    console.log(
      `  SSE watchers: ${CLIENTS}; platform RSS +${((rss2 - rssClosed) / 1024).toFixed(1)} MiB → ${((rss2 - rssClosed) / CLIENTS).toFixed(1)} KiB per watcher`,
    );
    console.log(
      `  cancel → watchers' cancelled event: ${eventLatencies.length} events; p50 ${ms(percentile(eventLatencies, 50))}, p99 ${ms(percentile(eventLatencies, 99))}`,
    );
    console.log(
      `  webhooks: ${WEBHOOKS} due at once delivered in ${deliverS.toFixed(2)} s → ${(WEBHOOKS / deliverS).toFixed(0)} deliveries/s to a local receiver`,
    );
  } finally {
    for (const c of open) c.close();
    await platform?.stop();
    await receiver.close();
    await dropDatabase(databaseUrl).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
