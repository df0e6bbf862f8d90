/**
 * bench:deployments — model deployments (issue 29, docs/deployments.md) against the real platform:
 * gateway + auth + gpu-scheduler + inference in one process, a gpu-node (process executor,
 * bubblewrap, simulated cards) in another, over NATS (bench/deployments-platform.ts). The replica
 * is the tests' OpenAI-compatible server (test/fixtures/deployments/replica-server.js) run as a
 * deployment's job, reached through its node's serve relay; the same server, started with the
 * same command on the host, is the direct path. Three measures:
 *  - cold start: a new deployment (no replica), request → first byte (response headers), minus
 *    the server's own start (spawn → "listening", the same command on the host, started just
 *    before each cold start): the platform's part (submit, placement, sandbox, readiness probe);
 *  - warm added latency: POST /v1/chat/completions at concurrency 1 through the platform (JWT) vs
 *    the host's server directly, and Portkey's gateway in front of that server (bench/portkey.ts),
 *    in alternating short rounds (bench/inference-measure.ts); and the same platform's /v1 to that
 *    server as an ordinary provider (no deployment: what is the deployment path's own). Goal: added p50 ≤ 2 ms;
 *  - requests/s, 50 concurrent, through a deployment of one replica and one of two, beside direct.
 * Defaults as shipped (DEPLOYMENTS_TICK_MS 1000, GPU_SCHEDULE_TICK_MS 1000); BENCH_* size the run.
 */
import http from "http";
import os from "os";
import { dropDatabase, freePort, testDatabaseUrl } from "../test/support/platform";
import { spread, median } from "./lib/spread";
import {
  createDeployment,
  deleteDeployment,
  forwarderPids,
  HostReplica,
  startHostReplica,
  startPlatform,
  stopHostReplica,
  waitReady,
  BenchPlatform,
} from "./deployments-platform";
import { agent, compare, cpuTimeUs, Figures, once, Target } from "./inference-measure";
import { installPortkey, Portkey, PORTKEY_VERSION, startPortkey } from "./portkey";

const COLD_STARTS = Number(process.env.BENCH_COLD_STARTS || 3);
const SERIAL = Number(process.env.BENCH_SERIAL || 300); // concurrency 1, per path
const CAPACITY_REQUESTS = Number(process.env.BENCH_CAPACITY_REQUESTS || 1000); // 50 concurrent, per path
const CPU_REQUESTS = Number(process.env.BENCH_CPU_REQUESTS || 400); // concurrency 1, per path, for CPU per request
const CONCURRENCY = 50;
const GOAL_ADDED_MS = 2;

const chat = (model: string) => (i: number) => JSON.stringify({ model, messages: [{ role: "user", content: `Why is the sky blue? #${i}` }] });

/** One chat completion for a deployment with no replica: ms until its response headers, and whether it says it waited. */
function firstByte(p: BenchPlatform, model: string): Promise<{ ms: number; cold: boolean }> {
  const body = chat(model)(0);
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.request({
      host: "127.0.0.1",
      port: p.port,
      path: "/v1/chat/completions",
      method: "POST",
      agent: false,
      headers: { authorization: `Bearer ${p.jwt}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
    });
    req.once("error", reject);
    req.once("response", (res) => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      let text = "";
      res.on("data", (d) => (text += d));
      res.once("end", () =>
        res.statusCode === 200 && text.includes("echo: ")
          ? resolve({ ms, cold: res.headers["x-ci-cold-start"] === "true" })
          : reject(new Error(`cold start: ${res.statusCode} ${text.slice(0, 300)}`)),
      );
    });
    req.end(body);
  });
}

/** Cold starts, each beside the host server's own start measured right before it. */
async function coldStarts(p: BenchPlatform) {
  const rows: Array<{ firstByte: number; serverStart: number }> = [];
  for (let i = 0; i < COLD_STARTS; i++) {
    const host = await startHostReplica(`host-${i}`);
    await stopHostReplica(host);
    const id = await createDeployment(p, `cold-${i}`, { min: 0, max: 1 });
    const answer = await firstByte(p, `cold-${i}`);
    if (!answer.cold) throw new Error("the first request of a new deployment was not a cold start");
    rows.push({ firstByte: answer.ms, serverStart: host.startMs });
    await deleteDeployment(p, id);
  }
  return rows;
}

/** `forwarders`: the replicas' serve forwarders, inside their sandboxes (all of them; the idle ones add nothing). */
type Cpu = { gateway: number; node: number; forwarders: number };

const cpuNow = (p: BenchPlatform, forwarders: number[]): Cpu => ({
  gateway: cpuTimeUs(p.pids.gateway) ?? NaN,
  node: cpuTimeUs(p.pids.node) ?? NaN,
  forwarders: forwarders.reduce((sum, pid) => sum + (cpuTimeUs(pid) ?? NaN), 0),
});

/**
 * CPU time (user + system) per request of the gateway's process and the gpu-node's, µs: `total`
 * requests one at a time per path, in alternating rounds of 50, less what each process spends
 * idle in as long (its background rate, measured over 3 s with no requests: ticks, heartbeats,
 * probes). Load on the machine moves it far less than latency (it is what a request costs, not
 * how long it queued).
 */
async function cpuPerRequest(p: BenchPlatform, targets: Target[], total: number): Promise<Cpu[]> {
  const forwarders = p.pids.node === undefined ? [] : forwarderPids(p.pids.node);
  const idleFrom = cpuNow(p, forwarders);
  const idleStarted = process.hrtime.bigint();
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const idleS = Number(process.hrtime.bigint() - idleStarted) / 1e9;
  const idleTo = cpuNow(p, forwarders);
  const rate = (k: keyof Cpu) => (idleTo[k] - idleFrom[k]) / idleS;
  const background = { gateway: rate("gateway"), node: rate("node"), forwarders: rate("forwarders") };
  const sums = targets.map(() => ({ gateway: 0, node: 0, forwarders: 0, n: 0 }));
  for (let done = 0; done < total; done += 50)
    for (const [i, t] of targets.entries()) {
      const before = cpuNow(p, forwarders);
      const started = process.hrtime.bigint();
      for (let k = 0; k < 50; k++) await once(t, false, done + k);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const after = cpuNow(p, forwarders);
      sums[i].gateway += after.gateway - before.gateway - background.gateway * seconds;
      sums[i].node += after.node - before.node - background.node * seconds;
      sums[i].forwarders += after.forwarders - before.forwarders - background.forwarders * seconds;
      sums[i].n += 50;
    }
  return sums.map((s) => ({ gateway: s.gateway / s.n, node: s.node / s.n, forwarders: s.forwarders / s.n }));
}

/** What the bench is doing, on stderr (the table is printed at the end). */
const progress = (what: string) => console.error(`[bench:deployments ${new Date().toISOString().slice(11, 19)}] ${what}`);
const ms = (v: number) => `${v.toFixed(2)} ms`;
const plus = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;
const ok = (f: Figures): f is { p50: number; p99: number; rps: number } => !("error" in f);

async function main() {
  const databaseUrl = testDatabaseUrl();
  const installed = installPortkey();
  let portkey: Portkey | undefined;
  let portkeyProblem = "error" in installed ? installed.error : undefined;
  let direct: HostReplica | undefined;
  let platform: BenchPlatform | undefined;
  try {
    direct = await startHostReplica("direct");
    if ("dir" in installed) portkey = await startPortkey(installed.dir, await freePort()).catch((err: Error) => ((portkeyProblem = err.message), undefined));
    // Cards: one per cold start at a time, one for the one-replica deployment, two for the two-replica one.
    // The same server is also an ordinary OpenAI-compatible provider: the platform's own part of the added latency.
    platform = await startPlatform(databaseUrl, 4, { OPENAI_PROVIDERS: JSON.stringify([{ name: "vllm", url: `http://127.0.0.1:${direct.port}` }]) });
    const p = platform;

    progress(`cold starts (${COLD_STARTS})`);
    const cold = await coldStarts(p);

    const one = await createDeployment(p, "one", { min: 1, max: 1 });
    const two = await createDeployment(p, "two", { min: 2, max: 2 });
    await waitReady(p, one, 1);
    await waitReady(p, two, 2);
    const auth = { authorization: `Bearer ${p.jwt}` };
    const target = (name: string, port: number, model: string, headers: Record<string, string> = {}): Target => ({
      name,
      port,
      path: "/v1/chat/completions",
      headers,
      body: chat(model),
    });
    const directT = target("direct (host)", direct.port, "one");
    const portkeyT = portkey
      ? [target("portkey", portkey.port, "one", { "x-portkey-provider": "openai", "x-portkey-custom-host": `http://127.0.0.1:${direct.port}/v1`, ...auth })]
      : [];
    const providerT = target("platform → host server as a provider", p.port, "tiny-direct", auth);
    const oneT = target("platform, 1 replica", p.port, "one", auth);
    const twoT = target("platform, 2 replicas", p.port, "two", auth);
    for (const t of [directT, ...portkeyT, providerT, oneT, twoT]) await once(t, false); // every path answers before timing

    progress(`warm, concurrency 1 (${SERIAL} per path)`);
    const warm = await compare([directT, ...portkeyT, providerT, oneT], SERIAL, 1, false);
    progress(`CPU per request (${CPU_REQUESTS} per path)`);
    const cpu = await cpuPerRequest(p, [providerT, oneT], CPU_REQUESTS);
    progress(`requests/s, ${CONCURRENCY} concurrent (${CAPACITY_REQUESTS} per path)`);
    const capacity = await compare([directT, oneT, twoT], CAPACITY_REQUESTS, CONCURRENCY, false);

    console.log(
      `\nbench:deployments — replica server (test/fixtures/deployments) in a sandboxed job on a gpu-node over NATS, ` +
        `${process.env.BENCH_SERVE_DIRECT === "off" ? "requests over the bus (BENCH_SERVE_DIRECT=off)" : "requests over the node's direct serve channel"}; Portkey ${PORTKEY_VERSION}; ` +
        `${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)} at the end`,
    );
    if (portkeyProblem) console.log(`Portkey not measured: ${portkeyProblem}`);

    console.log("\nCold start (a new deployment, no replica): request → first byte, and the server's own start on the host");
    console.log("| # | request → first byte | server's own start | the platform's part |");
    console.log("|---|---|---|---|");
    cold.forEach((c, i) => console.log(`| ${i + 1} | ${ms(c.firstByte)} | ${ms(c.serverStart)} | ${ms(c.firstByte - c.serverStart)} |`));
    const parts = cold.map((c) => c.firstByte - c.serverStart);
    console.log(
      `min / median / max: first byte ${spread(cold.map((c) => c.firstByte))} ms, server ${spread(cold.map((c) => c.serverStart))} ms, ` +
        `platform ${spread(parts)} ms`,
    );

    console.log(`\nWarm /v1/chat/completions, concurrency 1, ${SERIAL} requests per path (goal: added p50 ≤ ${GOAL_ADDED_MS} ms)`);
    console.log("| path | p50 | p99 | req/s | added p50 | added p99 |");
    console.log("|---|---|---|---|---|---|");
    const base = warm[0];
    [directT, ...portkeyT, providerT, oneT].forEach((t, i) => {
      const f = warm[i];
      if (!ok(f)) return console.log(`| ${t.name} | failed: ${f.error.replace(/\|/g, "/").slice(0, 120)} | | | | |`);
      const added = i > 0 && ok(base) ? `${plus(f.p50 - base.p50)} | ${plus(f.p99 - base.p99)}` : " | ";
      console.log(`| ${t.name} | ${ms(f.p50)} | ${ms(f.p99)} | ${f.rps} | ${added} |`);
    });

    console.log(`\nCPU per request (user + system, less the process's idle rate, µs), ${CPU_REQUESTS} requests one at a time per path, alternating`);
    console.log("| path | gateway + inference process | gpu-node process | both | the replica's serve forwarder (in its sandbox) |");
    console.log("|---|---|---|---|---|");
    [providerT, oneT].forEach((t, i) =>
      console.log(
        `| ${t.name} | ${cpu[i].gateway.toFixed(0)} | ${cpu[i].node.toFixed(0)} | ${(cpu[i].gateway + cpu[i].node).toFixed(0)} | ${cpu[i].forwarders.toFixed(0)} |`,
      ),
    );

    console.log(`\nRequests/s, ${CONCURRENCY} concurrent, ${CAPACITY_REQUESTS} requests per path`);
    console.log("| path | req/s | of direct | p50 | p99 |");
    console.log("|---|---|---|---|---|");
    [directT, oneT, twoT].forEach((t, i) => {
      const f = capacity[i];
      if (!ok(f)) return console.log(`| ${t.name} | failed: ${f.error.replace(/\|/g, "/").slice(0, 120)} | | | |`);
      const of = ok(capacity[0]) ? `${((f.rps / capacity[0].rps) * 100).toFixed(0)} %` : "n/a";
      console.log(`| ${t.name} | ${f.rps} | ${of} | ${ms(f.p50)} | ${ms(f.p99)} |`);
    });

    console.log("\nSummary:");
    console.log(
      `- cold start: median ${median(cold.map((c) => c.firstByte)).toFixed(0)} ms to the first byte, of which the server's own start ${median(cold.map((c) => c.serverStart)).toFixed(0)} ms; the platform's part ${median(parts).toFixed(0)} ms`,
    );
    const platformWarm = warm[warm.length - 1];
    if (ok(platformWarm) && ok(base)) {
      const added = platformWarm.p50 - base.p50;
      const provider = warm[warm.length - 2];
      const viaProvider = ok(provider)
        ? `; the same platform to the server as a provider ${plus(provider.p50 - base.p50)} / ${plus(provider.p99 - base.p99)}`
        : "";
      const pk = portkey && ok(warm[1]) ? `; Portkey ${plus(warm[1].p50 - base.p50)} / ${plus(warm[1].p99 - base.p99)}` : "";
      console.log(
        `- warm added p50 / p99: platform ${plus(added)} / ${plus(platformWarm.p99 - base.p99)} (goal ≤ ${GOAL_ADDED_MS} ms: ${added <= GOAL_ADDED_MS ? "met" : "NOT met"})${viaProvider}${pk}`,
      );
    }
    const [d, o, t] = capacity;
    console.log(
      `- CPU per request: deployment ${(cpu[1].gateway + cpu[1].node).toFixed(0)} µs (gateway ${cpu[1].gateway.toFixed(0)}, node ${cpu[1].node.toFixed(0)}), provider path ${cpu[0].gateway.toFixed(0)} µs; the forwarder in the sandbox ${cpu[1].forwarders.toFixed(0)} µs`,
    );
    if (ok(d) && ok(o) && ok(t)) console.log(`- requests/s: one replica ${o.rps}, two ${t.rps} (×${(t.rps / o.rps).toFixed(2)}); direct ${d.rps}`);
  } finally {
    if (platform) await platform.stop();
    portkey?.stop();
    if (direct) await stopHostReplica(direct);
    agent.destroy();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
