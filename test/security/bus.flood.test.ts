/**
 * Attacks by a gpu-node credential on the platform's availability, replayed against Debian's
 * nats-server with the platform's generated users: a heartbeat flood (one node's credential
 * broadcasting valid heartbeats as fast as it can), a job-event flood on its own JetStream subject
 * and a node advertising core services. The core services run in one process, as in a small
 * install, so a stalled event loop shows everywhere.
 */
import { spawn } from "child_process";
import { randomUUID } from "crypto";
import { ServiceBroker } from "moleculer";
import { natsConnectionOptions } from "../../lib/bus-connection";
import { BusServer, busBroker as startBroker, startBusServer } from "../support/bus-server";
import { ChildService, http, ROOT, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

const namespace = uniqueName("busflood");
const P = `MOL-${namespace}`;
let server: BusServer;
let platform: NatsPlatform;
let core: ChildService;
let gatewayProc: ChildService;
let honest: ChildService;
let base = "";
let probe: ServiceBroker;
const brokers: ServiceBroker[] = [];

/** A broker holding `user`'s credential, publishing as `nodeID`, running `services`. */
const busBroker = (user: string, nodeID: string, services: Parameters<ServiceBroker["createService"]>[0][] = []) =>
  startBroker(server, { namespace, user, nodeID, services, requestTimeout: 3000 }, brokers);

/** Starts `services` in a process of the platform holding `user`'s credential. */
const spawnAs = (user: string, services: string[]) => platform.spawn(services, { TRANSPORTER: server.urlFor(user) });

const alive = (c: ChildService) => c.proc.exitCode === null && c.proc.signalCode === null;
const children = () => [core, gatewayProc, honest].filter(Boolean);

async function register(tag: string) {
  const email = `${uniqueName(tag)}@example.com`;
  const reg = await http(base, "POST", "/api/auth/register", { body: { email, name: "Flood", password: "password-123" } });
  expect(reg.status).toBe(201);
  const key = await http(base, "POST", "/api/auth/api-keys", { token: reg.body.accessToken });
  expect(key.status).toBe(201);
  return { email, token: reg.body.accessToken as string, apiKey: key.body.apiKey as string };
}

async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const start = performance.now();
  const value = await work();
  return [performance.now() - start, value];
}

/** `request`'s status, or 0 when it has not answered within `ms` (it is left to finish on its own). */
async function statusWithin(ms: number, request: Promise<{ status: number }>): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), ms)));
  return Promise.race([request.then((r) => r.status), late]).finally(() => clearTimeout(timer));
}

/** On main the same flood took this API to 25 s; here it stays near its usual ms on a quiet machine (the bound leaves room for a busy one). */
const P99_BOUND_MS = 3000;

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))];

beforeAll(async () => {
  server = await startBusServer({ namespace, gpuNodes: ["n1", "n2", "n3"] });
  platform = await startNatsPlatform({
    namespace,
    transporter: server.url,
    env: {
      JWT_SECRET: "bus-flood-secret",
      GPU_EXECUTOR: "process",
      GPU_UNSAFE_UNISOLATED_JOBS: "true",
      GPU_HEARTBEAT_S: "1",
      GPU_NODE_TIMEOUT_S: "5",
      GPU_SIMULATE: "NVIDIA GeForce RTX 3060:12288",
      AUTH_RATE_LIMIT_PER_EMAIL: "10000",
      AUTH_RATE_LIMIT_PER_IP: "10000",
    },
  });
  base = platform.baseUrl;
  gatewayProc = spawnAs("api-gateway", ["api-gateway"]);
  core = spawnAs("core", ["auth", "gpu-scheduler"]);
  honest = spawnAs("gpu-node.n2", ["gpu-node"]);
  const victim = { token: "" };
  await platform.waitFor(
    async () => {
      if (!victim.token) {
        const reg = await http(base, "POST", "/api/auth/register", {
          body: { email: `${uniqueName("probe")}@example.com`, name: "P", password: "password-123" },
        }).catch(() => undefined);
        if (reg?.status !== 201) return false;
        victim.token = reg.body.accessToken;
      }
      const res = await http(base, "GET", "/api/gpu/status", { token: victim.token });
      return res.status === 200 && JSON.stringify(res.body).includes("RTX 3060");
    },
    { timeoutMs: 60_000, message: "the platform over the authenticated bus, with gpu-node n2" },
  );
  probe = await busBroker("api-gateway", "api-gateway.probe");
}, 90_000);

afterAll(async () => {
  await Promise.all(brokers.map((b) => b.stop().catch(() => undefined)));
  await platform?.stop();
  await server?.stop();
});

/** Publishes `count` copies of a heartbeat event as n1 for at most `ms`, from its own process (as fast as nats.js goes). */
function flood(schedulerNode: string, ms: number, count: number): Promise<{ sent: number; output: string }> {
  const cards = Array.from({ length: 64 }, (_, i) => ({
    uuid: `GPU-${randomUUID()}`,
    index: i,
    name: "NVIDIA H100 80GB HBM3",
    memoryTotal: 81559,
    memoryUsed: 0,
    utilization: 0,
    temperature: 30,
  }));
  const hb = {
    nodeId: "gpu-node.n1",
    cards,
    runningJobIds: Array.from({ length: 501 }, () => randomUUID()),
    executor: "process",
    at: new Date().toISOString(),
  };
  const packet = {
    ver: "4",
    sender: "gpu-node.n1",
    id: "flood",
    event: "gpu-node.heartbeat",
    data: hb,
    groups: ["gpu-scheduler"],
    broadcast: true,
    meta: {},
    level: 1,
  };
  return publishAsN1(`${P}.EVENT.${schedulerNode}.gpu-node.heartbeat.gpu-node.n1`, JSON.stringify(packet), ms, count);
}

/** Publishes `count` copies of `payload` on `subject` with gpu-node.n1's credential for at most `ms` (`spread`: evenly over it), from its own process. */
function publishAsN1(subject: string, payload: string, ms: number, count: number, spread = false): Promise<{ sent: number; output: string }> {
  const script = `
    const { connect } = require("nats");
    (async () => {
      const o = JSON.parse(process.env.FLOOD);
      const nc = await connect({ servers: o.servers, user: o.user, pass: o.pass, inboxPrefix: "_INBOX.gpu-node.n1" });
      const data = Buffer.from(o.packet);
      const start = Date.now();
      let sent = 0;
      while (sent < o.count && Date.now() < start + o.ms) {
        nc.publish(o.subject, data);
        if (++sent % 50 === 0) await nc.flush();
        // Spread: no faster than count per ms.
        const ahead = o.spread ? start + (sent / o.count) * o.ms - Date.now() : 0;
        if (ahead > 0) await new Promise((r) => setTimeout(r, ahead));
      }
      await nc.flush();
      await nc.close();
      console.log("sent " + sent);
    })().catch((e) => { console.error(e); process.exit(1); });`;
  const options = natsConnectionOptions(server.urlFor("gpu-node.n1"));
  const FLOOD = JSON.stringify({ servers: options.servers, user: options.user, pass: options.pass, subject, packet: payload, ms, count, spread });
  const proc = spawn(process.execPath, ["-e", script], { cwd: ROOT, env: { ...process.env, FLOOD }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  proc.stdout.on("data", (d) => (output += d));
  proc.stderr.on("data", (d) => (output += d));
  return new Promise((resolve) => proc.once("exit", () => resolve({ sent: Number(/sent (\d+)/.exec(output)?.[1] ?? 0), output })));
}

/** Times GETs of `path` (default: the account's jobs), one after another, until `flooding` settles; `seen` gets each answer's body. */
async function apiLatencies(
  flooding: Promise<unknown>,
  token: string,
  path = "/api/gpu/jobs",
  seen: (body: Record<string, unknown>) => void = () => undefined,
): Promise<{ latencies: number[]; failed: number[] }> {
  let done = false;
  void flooding.then(() => (done = true));
  const latencies: number[] = [];
  const failed: number[] = [];
  while (!done) {
    const [ms, res] = await timed(() => http(base, "GET", path, { token }));
    latencies.push(ms);
    if (res.status === 200) seen(res.body);
    else failed.push(res.status);
  }
  return { latencies, failed };
}

describe("bus flood - one gpu-node credential against the control plane", () => {
  it("bus flood - a heartbeat flood from gpu-node.n1 keeps the API responsive and another account's job on n2 running", async () => {
    const victim = await register("victim");
    const job = await http(base, "POST", "/api/gpu/jobs", { token: victim.token, body: { command: "sleep 120" } });
    expect(job.status).toBe(201);
    await waitFor(async () => (await http(base, "GET", `/api/gpu/jobs/${job.body.id}`, { token: victim.token })).body.status === "running", {
      timeoutMs: 20_000,
      message: "the victim's job to run on n2",
    });
    const schedulerNode = await waitFor(
      () => probe.registry.getServiceList({ onlyAvailable: true }).find((s: { name: string }) => s.name === "gpu-scheduler")?.nodeID,
    );
    const gatewayNode = await waitFor(
      () => probe.registry.getServiceList({ onlyAvailable: true }).find((s: { name: string }) => s.name === "api-gateway")?.nodeID,
    );

    const flooding = flood(schedulerNode as string, 6000, 10_000);
    const { latencies, failed } = await apiLatencies(flooding, victim.token);
    const { sent, output } = await flooding;
    expect(output).toMatch(/sent \d+/);
    const p99 = percentile(latencies, 99);
    console.log(
      `heartbeat flood: ${sent} heartbeats sent; GET /api/gpu/jobs during it: ${latencies.length} requests (${failed.length} failed), ` +
        `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`,
    );
    expect(sent).toBeGreaterThan(1000);
    expect(failed).toEqual([]);
    expect(p99).toBeLessThan(P99_BOUND_MS);
    // Until the backlog (if any) is worked off: a quick answer again.
    await waitFor(async () => (await timed(() => http(base, "GET", "/api/gpu/jobs", { token: victim.token })))[0] < 200, {
      timeoutMs: 60_000,
      message: "the API to answer quickly again",
    });
    // The victim's job is untouched and its node still known; nobody was dropped from the core's registry.
    const after = await http(base, "GET", `/api/gpu/jobs/${job.body.id}`, { token: victim.token });
    expect(after.body.status).toBe("running");
    expect(JSON.stringify((await http(base, "GET", "/api/gpu/status", { token: victim.token })).body)).toContain("RTX 3060");
    expect(core.output()).not.toMatch(new RegExp(`Node '(${gatewayNode}|gpu-node.n2)' disconnected`));
    expect(children().every(alive)).toBe(true);
    await http(base, "POST", `/api/gpu/jobs/${job.body.id}/cancel`, { token: victim.token });
  }, 180_000);
});

describe("bus flood - a gpu-node credential advertising core services", () => {
  it("bus flood - services auth, gpu-scheduler and dbaas declared by gpu-node.n3 are never routed to", async () => {
    const accounts = await Promise.all([1, 2, 3, 4, 5, 6].map(() => register("spoof")));
    const answer = () => ({ spoofed: true });
    await busBroker("gpu-node.n3", "gpu-node.n3", [
      { name: "auth", actions: { login: answer, resolveApiKey: answer, resolveAccount: answer, register: answer } },
      { name: "gpu-scheduler", actions: { create: answer, list: answer } },
      { name: "dbaas", actions: { create: answer } },
      { name: "gpu-node", actions: {} },
    ]);
    await waitFor(() => probe.registry.nodes.get("gpu-node.n3")?.available, { message: "the gateway's side to hear gpu-node.n3" });

    const calls = accounts.flatMap((a) => [
      { what: "login", want: 200, req: http(base, "POST", "/api/auth/login", { body: { email: a.email, password: "password-123" } }) },
      { what: "api key", want: 200, req: http(base, "GET", "/api/auth/me", { headers: { "x-api-key": a.apiKey } }) },
      { what: "submit", want: 201, req: http(base, "POST", "/api/gpu/jobs", { token: a.token, body: { command: "true" } }) },
    ]);
    // Each answers within 5 s (a call routed to the rogue would hang until the 30 s request timeout).
    const results = await Promise.all(calls.map(async (c) => ({ what: c.what, want: c.want, status: await statusWithin(5000, c.req) })));
    const wrong = results.filter((r) => r.status !== r.want);
    expect(wrong).toEqual([]);
    const listed = probe.registry.getServiceList({ onlyAvailable: true, skipInternal: true }) as unknown as Array<{ name: string; nodeID: string }>;
    const fromRogue = listed.filter((s) => s.nodeID === "gpu-node.n3").map((s) => s.name);
    expect(fromRogue).toEqual(["gpu-node"]);
  }, 90_000);
});

const EVENT_LAG_BOUND_MS = 3000;

describe("bus flood - job events from one gpu-node credential", () => {
  it("bus flood - a job-event flood from gpu-node.n1 delays neither another account's job completion on n2 nor the API", async () => {
    const victim = await register("events");
    // Valid events of a job nobody knows, on n1's own subject, 3,300 a second: each costs the scheduler a parse and a read.
    const event = {
      type: "finished",
      jobId: randomUUID(),
      nodeId: "gpu-node.n1",
      gpuUuid: "GPU-rogue",
      at: new Date().toISOString(),
      exitCode: 0,
      output: "x".repeat(32000),
    };
    const floodStart = Date.now();
    const flooding = publishAsN1(`${namespace}.gpu.job-events.gpu-node.n1`, JSON.stringify(event), 6000, 20_000, true);
    // The victim's whole job runs during the flood.
    const job = await http(base, "POST", "/api/gpu/jobs", { token: victim.token, body: { command: "sleep 4" } });
    expect(job.status).toBe(201);
    const path = `/api/gpu/jobs/${job.body.id}`;
    let completed: { seenAt: number; body: Record<string, unknown> } | undefined;
    const seen = (body: Record<string, unknown>) => void (completed ??= body.status === "completed" ? { seenAt: Date.now(), body } : undefined);
    const { latencies, failed } = await apiLatencies(flooding, victim.token, path, seen);
    const { sent, output } = await flooding;
    const floodEnd = Date.now();
    expect(output).toMatch(/sent \d+/);
    await waitFor(async () => (seen((await http(base, "GET", path, { token: victim.token })).body), completed), {
      timeoutMs: 120_000,
      message: "the victim's job to be completed",
    });
    const endedAt = Date.parse(completed!.body.completedAt as string);
    const lagMs = completed!.seenAt - endedAt;
    console.log(
      `job-event flood: ${sent} events sent in ${floodEnd - floodStart} ms; the honest job ended ${endedAt - floodStart} ms into it, its completion seen ${lagMs} ms after; ` +
        `GET ${path} during it: ${latencies.length} requests (${failed.length} failed), p99 ${percentile(latencies, 99).toFixed(1)} ms`,
    );
    expect(sent).toBeGreaterThan(1000);
    expect(failed).toEqual([]);
    expect(percentile(latencies, 99)).toBeLessThan(P99_BOUND_MS);
    // Applied promptly although the job ended while the flood went on (on main: 5 to 7 s, with the cap about 0.5 s on a quiet machine).
    expect(lagMs).toBeLessThan(EVENT_LAG_BOUND_MS);
    expect(endedAt).toBeLessThan(floodEnd);
    expect(children().every(alive)).toBe(true);
  }, 180_000);
});
