/**
 * A gpu-node may claim any hardware (security issue, finding 4). A compromised host that first
 * registered one card re-announces fake H100s to draw other accounts' jobs, with their `env`
 * secrets; another node announces more cards than the operator's GPU_NODE_CARDS allows. Over
 * NATS: gateway, auth, admin, metrics and the scheduler in this process, one honest gpu-node, and
 * the rogue nodes as brokers of this test that record every job handed to them.
 */
import { mkdtempSync } from "fs";
import { Client } from "pg";
import os from "os";
import path from "path";
import type { ServiceBroker } from "moleculer";
import type { GpuCard } from "../../lib/gpu-protocol";
import type { RunJobParams } from "../../lib/job-spec";
import { HEARTBEAT_EVENT } from "../../lib/gpu-protocol";
import { metricsPortOf } from "../../lib/metrics";
import { findSamples, parsePrometheus } from "../support/prometheus";
import { http, NATS_URL, sandboxedGpuEnv, startTestPlatform, TestPlatform, testBroker, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";
import { testCard } from "../support/gpu-card";

const namespace = uniqueName("cards");
const work = mkdtempSync(path.join(os.tmpdir(), "node-cards-"));
const honestId = `${namespace}-honest`;
const evilId = `${namespace}-evil`;
const boundId = `${namespace}-bound`;
const dupId = `${namespace}-dup`;
const SECRET = "victim-secret-value";

const card = testCard;
const H100 = (uuid: string, index: number) => card(uuid, index, "NVIDIA H100 80GB HBM3", 81559);

/** A rogue gpu-node: announces `cards` every 200 ms and accepts every job, keeping it "running" forever. */
type Rogue = { broker: ServiceBroker; cards: GpuCard[]; runs: RunJobParams[]; timer?: NodeJS.Timeout };
async function rogue(nodeID: string, cards: GpuCard[]): Promise<Rogue> {
  const r: Rogue = { broker: testBroker({ transporter: NATS_URL, namespace, nodeID }), cards, runs: [] };
  r.broker.createService({
    name: "gpu-node",
    actions: {
      run: (ctx) => {
        r.runs.push(ctx.params as RunJobParams);
        return { accepted: true };
      },
      cancel: () => ({ stopped: true }),
    },
  });
  await r.broker.start();
  const beat = () =>
    void r.broker
      .broadcast(HEARTBEAT_EVENT, {
        nodeId: nodeID,
        cards: r.cards,
        runningJobIds: r.runs.map((j) => j.jobId),
        executor: "process",
        at: new Date().toISOString(),
      })
      .catch(() => undefined);
  r.timer = setInterval(beat, 200);
  return r;
}
/** Every card uuid `r` was handed a job on. */
const usedCards = (r: Rogue) => [...new Set(r.runs.flatMap((j) => j.gpuUuids ?? [j.gpuUuid]))].sort();

let platform: NatsPlatform;
let honest: TestPlatform;
let evil: Rogue;
let bound: Rogue;
let dup: Rogue;
let admin: string;
let victim: string;
let metricsUrl: string;

const api = (token: string, method: string, url: string, body?: unknown) => http(platform.baseUrl, method, url, { token, body });
const nodeView = async (id: string) => (await api(admin, "GET", "/api/admin/nodes")).body?.nodes?.find((n: any) => n.id === id);
/** Cards the scheduler knows of a node, taking jobs or not (before the fix: `cards` only). */
const known = (n: any) => (n?.cards?.length ?? 0) + (n?.pendingCards?.length ?? 0) + (n?.disallowedCards?.length ?? 0);

beforeAll(async () => {
  const adminEmail = `${namespace}-ops@example.com`;
  platform = await startNatsPlatform({
    namespace,
    work,
    local: ["api-gateway", "auth", "admin", "metrics", "gpu-scheduler"],
    localEnv: {
      ADMIN_EMAILS: adminEmail,
      GPU_HEARTBEAT_S: "1",
      GPU_SCHEDULE_TICK_MS: "100",
      METRICS_COLLECT_INTERVAL_S: "0.2",
      // The operator allows the bound node one card of its type, whatever it announces.
      GPU_NODE_CARDS: `${boundId}=Test GPU:1`,
    },
  });
  honest = await startTestPlatform({
    services: ["gpu-node"],
    transporter: NATS_URL,
    namespace,
    databaseUrl: platform.databaseUrl,
    dropDatabase: false,
    nodeID: honestId,
    env: { ...platform.env, ...sandboxedGpuEnv(work) },
  });
  // First registrations: the evil node one card, the bound node two.
  evil = await rogue(evilId, [card("GPU-evil-0", 0)]);
  bound = await rogue(boundId, [card("GPU-bound-0", 0), card("GPU-bound-1", 1)]);
  const reg = async (email: string) =>
    (await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, name: "n", password: "password-123" } })).body;
  await waitFor(async () => (await http(platform.baseUrl, "POST", "/api/auth/login", { body: {} })).status === 400, { timeoutMs: 30_000, message: "routes" });
  admin = (await reg(adminEmail)).accessToken;
  victim = (await reg(`${namespace}-victim@example.com`)).accessToken;
  await waitFor(async () => known(await nodeView(evilId)) === 1 && known(await nodeView(boundId)) === 2 && known(await nodeView(honestId)) === 1, {
    timeoutMs: 30_000,
    message: "three nodes registered",
  });
  // Heartbeats can arrive before the node's INFO: a job dispatched then fails ("not found") and goes elsewhere.
  const runsOn = (id: string) =>
    platform.local!.broker.registry.getServiceList({ onlyAvailable: true, skipInternal: true }).some((s) => s.nodeID === id && s.name === "gpu-node");
  await waitFor(() => [evilId, boundId, honestId].every(runsOn), { timeoutMs: 30_000, message: "every node's gpu-node known to the scheduler's broker" });
  metricsUrl = `http://127.0.0.1:${await waitFor(() => metricsPortOf(platform.local!.broker), { message: "metrics port" })}/metrics`;
}, 60_000);

afterAll(async () => {
  for (const r of [evil, bound, dup]) {
    clearInterval(r?.timer);
    await r?.broker.stop();
  }
  await honest?.stop();
  await platform?.stop();
});

describe("nodes - a compromised node claiming cards it never registered", () => {
  test("nodes - fake H100s re-announced by a node that registered one card draw none of a victim's `any` jobs until an admin accepts them", async () => {
    evil.cards = [card("GPU-evil-0", 0), H100("GPU-evil-1", 1), H100("GPU-evil-2", 2), H100("GPU-evil-3", 3)];
    await waitFor(async () => known(await nodeView(evilId)) === 4, { timeoutMs: 10_000, message: "the re-announced cards heard" });
    // Six `any` jobs with a secret: one may sit on each rogue's accepted card; the honest card runs the rest.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await api(victim, "POST", "/api/gpu/jobs", { command: `echo job ${i}`, env: { API_TOKEN: SECRET } });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    // Ends at once when a rogue is handed a job on a card it may not use.
    const forbidden = () => [...usedCards(evil).filter((u) => u !== "GPU-evil-0"), ...usedCards(bound).filter((u) => u !== "GPU-bound-0")];
    await waitFor(
      async () => {
        if (forbidden().length) return true;
        // The two jobs the rogues hold may be placed after the fourth completes: wait for those too.
        if (!usedCards(evil).length || !usedCards(bound).length) return false;
        const jobs = await Promise.all(ids.map(async (id) => (await api(victim, "GET", `/api/gpu/jobs/${id}`)).body));
        return jobs.filter((j) => j.status === "completed").length === 4;
      },
      { timeoutMs: 30_000, message: "four jobs completed on the honest card and one held by each rogue's registered card" },
    );
    expect(forbidden()).toEqual([]);
    expect(usedCards(evil)).toEqual(["GPU-evil-0"]);
    expect(usedCards(bound)).toEqual(["GPU-bound-0"]);
    expect(evil.runs).toHaveLength(1);

    const view = await nodeView(evilId);
    expect(view.cards.map((c: any) => c.uuid)).toEqual(["GPU-evil-0"]);
    expect(view.pendingCards.map((c: any) => c.uuid)).toEqual(["GPU-evil-1", "GPU-evil-2", "GPU-evil-3"]);
    // Clients see neither the fake cards nor may they ask for them.
    const status = (await api(victim, "GET", "/api/gpu/status")).body.cluster;
    expect(status.totalGpus).toBe(3);
    expect(JSON.stringify(status)).not.toContain("H100");
    expect((await api(victim, "POST", "/api/gpu/jobs", { command: "echo h100", gpuType: "H100" })).status).toBe(400);

    // The held-back cards are counted for operators.
    await waitFor(
      async () => {
        const samples = parsePrometheus(await (await fetch(metricsUrl)).text());
        const at = (name: string, node: string) => findSamples(samples, name, { node })[0]?.value;
        return at("platform_gpu_node_cards_pending", evilId) === 3 && at("platform_gpu_node_cards_disallowed", boundId) === 1;
      },
      { timeoutMs: 10_000, message: "3 pending cards of the evil node and 1 disallowed of the bound node in the metrics" },
    );
  });

  test("nodes - accepting cards is admin-only, for known nodes and pending cards only; a refusal changes nothing", async () => {
    const accept = (token: string, id: string, body?: unknown) => api(token, "POST", `/api/admin/nodes/${id}/cards/accept`, body);
    const refused = await accept(victim, evilId);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("FORBIDDEN");
    const unknown = await accept(admin, `${namespace}-nobody`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("NOT_FOUND");
    for (const body of [{ uuids: ["GPU-evil-0"] }, { uuids: ["GPU-nope"] }, { uuids: [] }, { uuids: "GPU-evil-1" }, { everything: true }]) {
      const bad = await accept(admin, evilId, body);
      expect([bad.status, bad.body?.error?.code]).toEqual([400, "VALIDATION_FAILED"]);
    }
    // The disallowed card of the bound node is no pending card: accepting it is refused too.
    expect((await accept(admin, boundId, { uuids: ["GPU-bound-1"] })).status).toBe(400);
    expect((await nodeView(evilId)).pendingCards).toHaveLength(3);
    expect(usedCards(evil)).toEqual(["GPU-evil-0"]);
  });

  test("nodes - once an admin accepts some pending cards, jobs may go to those, and only those", async () => {
    const res = await api(admin, "POST", `/api/admin/nodes/${evilId}/cards/accept`, { uuids: ["GPU-evil-1"] });
    expect(res.status).toBe(200);
    expect(res.body.cards.map((c: any) => c.uuid)).toEqual(["GPU-evil-0", "GPU-evil-1"]);
    expect(res.body.pendingCards.map((c: any) => c.uuid)).toEqual(["GPU-evil-2", "GPU-evil-3"]);
    const job = await api(victim, "POST", "/api/gpu/jobs", { command: "echo after", gpuType: "H100" });
    expect(job.status).toBe(201);
    await waitFor(async () => usedCards(evil).includes("GPU-evil-1"), { timeoutMs: 10_000, message: "a job on the accepted card" });
    expect(usedCards(evil)).toEqual(["GPU-evil-0", "GPU-evil-1"]);
    // Every acceptance an administrator tried is in the audit trail, refused ones with their code.
    const db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
    const audit = (await db.query("SELECT outcome, target FROM admin.audit_log WHERE action = 'admin.acceptNodeCards' ORDER BY id").finally(() => db.end()))
      .rows;
    expect(audit.at(-1)).toMatchObject({ outcome: "ok", target: { nodeId: evilId, uuids: ["GPU-evil-1"] } });
    // (Malformed bodies are refused by the route's validation before any handler: not audited, as for every admin route.)
    expect(audit.filter((r) => r.outcome === "VALIDATION_FAILED").map((r) => r.target.uuids)).toEqual([["GPU-evil-0"], ["GPU-nope"], ["GPU-bound-1"]]);
    // The bound node still never got a job on its card beyond GPU_NODE_CARDS.
    expect(usedCards(bound)).toEqual(["GPU-bound-0"]);
    expect((await nodeView(boundId)).disallowedCards.map((c: any) => c.uuid)).toEqual(["GPU-bound-1"]);
  });
});

describe("nodes - a node announcing one accepted card under several indices", () => {
  test("nodes - an accepted uuid repeated in a heartbeat is one card: the repeats take no job, and no gang job is placed on it", async () => {
    // Registered (after the other tests' jobs were placed) with one card, then announcing it four times.
    dup = await rogue(dupId, [card("GPU-dup-0", 0, "Dup GPU")]);
    await waitFor(async () => known(await nodeView(dupId)) === 1, { timeoutMs: 10_000, message: "the node registered" });
    dup.cards = [0, 1, 2, 3].map((i) => card("GPU-dup-0", i, "Dup GPU"));
    await waitFor(async () => known(await nodeView(dupId)) === 4, { timeoutMs: 10_000, message: "the repeated card heard" });
    const view = await nodeView(dupId);
    expect(view.cards.map((c: any) => c.uuid)).toEqual(["GPU-dup-0"]);
    expect(view.disallowedCards.map((c: any) => [c.uuid, c.index])).toEqual([
      ["GPU-dup-0", 1],
      ["GPU-dup-0", 2],
      ["GPU-dup-0", 3],
    ]);
    // Two "Dup GPU" cards on one node exist nowhere: the job is refused rather than placed on one card twice.
    const job = await api(victim, "POST", "/api/gpu/jobs", { command: "echo gang", gpuType: "Dup GPU", gpuCount: 2, env: { API_TOKEN: SECRET } });
    expect([job.status, job.body?.error?.code]).toEqual([400, "VALIDATION_FAILED"]);
    expect(dup.runs).toEqual([]);
  });
});
