/**
 * The Prometheus endpoint after real traffic: Moleculer's request metrics for the actions that
 * were called, and the platform's own metrics from a gpu-node heartbeat and inference events.
 */
import { HEARTBEAT_EVENT, NodeHeartbeat } from "../../lib/gpu-protocol";
import { metricsPortOf } from "../../lib/metrics";
import { http, startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { findSamples, parsePrometheus, Sample } from "../support/prometheus";

const find = findSamples;

describe("ops - Prometheus metrics after real traffic", () => {
  let platform: TestPlatform;
  let metricsUrl: string;
  const scrape = async () => {
    const res = await fetch(metricsUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    return parsePrometheus(await res.text());
  };

  beforeAll(async () => {
    platform = await startTestPlatform({ services: ["api-gateway", "auth", "metrics"] });
    const port = await waitFor(() => metricsPortOf(platform.broker), { message: "metrics port" });
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
  });

  afterAll(() => platform?.stop());

  it("ops - Moleculer request metrics count the actions that served HTTP requests", async () => {
    await waitFor(async () => (await http(platform.baseUrl, "POST", "/api/auth/login", { body: {} })).status === 400, {
      message: "routes",
    });
    const email = `metrics-${Date.now()}@example.com`;
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, name: "M", password: "correct horse" } });
    expect(reg.status).toBe(201);
    for (let i = 0; i < 3; i++) {
      const login = await http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password: "correct horse" } });
      expect(login.status).toBe(200);
    }
    const bad = await http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password: "wrong password" } });
    expect(bad.status).toBe(401);

    const samples = await scrape();
    const logins = find(samples, "moleculer_request_total", { action: "auth.login" });
    expect(logins.reduce((sum, s) => sum + s.value, 0)).toBe(5); // 1 invalid body + 3 ok + 1 refused
    expect(find(samples, "moleculer_request_total", { action: "auth.register" })[0]?.value).toBe(1);
    const loginErrors = find(samples, "moleculer_request_error_total", { action: "auth.login" });
    expect(loginErrors.reduce((sum, s) => sum + s.value, 0)).toBe(2);
    expect(find(samples, "moleculer_request_time_count", { action: "auth.login" })[0]?.value).toBe(5);
    // Every sample carries the node, so replicas can be told apart.
    expect(logins[0].labels.nodeID).toBe(platform.broker.nodeID);
  });

  it("ops - a gpu-node heartbeat becomes per-card GPU metrics", async () => {
    // A node reports only its own cards: the heartbeat's nodeId is its sender's (here, this broker).
    const heartbeat: NodeHeartbeat = {
      nodeId: platform.broker.nodeID,
      executor: "process",
      runningJobIds: [],
      at: new Date().toISOString(),
      cards: [
        { uuid: "GPU-aaaa", index: 0, name: "NVIDIA GeForce RTX 3060", memoryTotal: 12288, memoryUsed: 2048, utilization: 37, temperature: 61 },
        { uuid: "GPU-bbbb", index: 1, name: "NVIDIA GeForce RTX 3060", memoryTotal: 12288, memoryUsed: 0, utilization: 0, temperature: 40 },
      ],
    };
    await platform.broker.emit(HEARTBEAT_EVENT, heartbeat);
    await platform.broker.emit(HEARTBEAT_EVENT, { nodeId: "broken", cards: [{ uuid: 1 }] }); // ignored, never thrown
    await platform.broker.emit(HEARTBEAT_EVENT, { ...heartbeat, nodeId: "gpu-host-forged" }); // another node's id: ignored
    const samples = await waitFor(
      async () => {
        const s = await scrape();
        return find(s, "platform_gpu_utilization_percent").length === 2 ? s : false;
      },
      { message: "GPU metrics" },
    );
    const card0 = { node: platform.broker.nodeID, gpu: "GPU-aaaa", index: "0", card: "NVIDIA GeForce RTX 3060" };
    expect(samples.filter((x) => x.labels.node === "gpu-host-forged")).toEqual([]);
    expect(find(samples, "platform_gpu_utilization_percent", card0)[0].value).toBe(37);
    expect(find(samples, "platform_gpu_memory_used_mib", card0)[0].value).toBe(2048);
    expect(find(samples, "platform_gpu_memory_total_mib", card0)[0].value).toBe(12288);
    expect(find(samples, "platform_gpu_temperature_celsius", card0)[0].value).toBe(61);
    expect(find(samples, "platform_gpu_temperature_celsius", { gpu: "GPU-bbbb" })[0].value).toBe(40);
    expect(find(samples, "platform_gpu_utilization_percent", { node: "broken" })).toHaveLength(0);
  });

  it("ops - inference events become tokens, requests and latency per model", async () => {
    const events = [
      { model: "llama3.2:1b", provider: "ollama", tokensUsed: 120, durationMs: 800, outcome: "ok" },
      { model: "llama3.2:1b", provider: "ollama", tokensUsed: 80, durationMs: 1200, outcome: "ok" },
      { model: "qwen2.5:0.5b", provider: "ollama", tokensUsed: 0, durationMs: 30, outcome: "provider_error" },
      { model: "typed-by-a-client", provider: null, tokensUsed: null, durationMs: 2, outcome: "error" },
    ];
    for (const e of events) await platform.broker.emit("inference.completed", e);
    const samples = await waitFor(
      async () => {
        const s = await scrape();
        return find(s, "platform_inference_requests_total").length === 3 ? s : false;
      },
      { message: "inference metrics" },
    );
    const llama = { model: "llama3.2:1b", provider: "ollama" };
    expect(find(samples, "platform_inference_tokens_total", llama)[0].value).toBe(200);
    expect(find(samples, "platform_inference_requests_total", { ...llama, outcome: "ok" })[0].value).toBe(2);
    expect(find(samples, "platform_inference_requests_total", { model: "qwen2.5:0.5b", outcome: "provider_error" })[0].value).toBe(1);
    expect(find(samples, "platform_inference_duration_ms_count", llama)[0].value).toBe(2);
    expect(find(samples, "platform_inference_duration_ms_sum", llama)[0].value).toBe(2000);
    expect(find(samples, "platform_inference_duration_ms_bucket", { ...llama, le: "1000" })[0].value).toBe(1);
    expect(find(samples, "platform_inference_requests_total", { model: "(unknown)", provider: "none" })[0].value).toBe(1);
    expect(find(samples, "platform_inference_requests_total", { model: "typed-by-a-client" })).toHaveLength(0);
  });
});

describe("ops - queue, jobs and databases metrics from the real services", () => {
  let platform: TestPlatform;
  let metricsUrl: string;

  beforeAll(async () => {
    // No gpu-node: a submitted job stays queued, so the figures are known.
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "metrics", "gpu-scheduler", "dbaas"],
      env: { METRICS_COLLECT_INTERVAL_S: "0.2" },
    });
    const port = await waitFor(() => metricsPortOf(platform.broker), { message: "metrics port" });
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
  });

  afterAll(() => platform?.stop());

  const scrapeUntil = (what: string, ok: (s: Sample[]) => boolean) =>
    waitFor(
      async () => {
        const s = parsePrometheus(await (await fetch(metricsUrl)).text());
        return ok(s) ? s : false;
      },
      { message: what },
    );
  const value = (s: Sample[], name: string, labels: Record<string, string> = {}) => find(s, name, labels)[0]?.value;

  it("ops - a queued job and a created database show up in the gauges", async () => {
    await waitFor(async () => (await http(platform.baseUrl, "POST", "/api/auth/login", { body: {} })).status === 400, { message: "routes" });
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `stats-${Date.now()}@example.com`, name: "S", password: "correct horse" },
    });
    const token = reg.body.accessToken;
    await scrapeUntil("empty queue", (s) => value(s, "platform_gpu_queue_depth") === 0 && value(s, "platform_databases", { state: "active" }) === 0);

    await waitFor(async () => (await http(platform.baseUrl, "GET", "/api/gpu/jobs", { token })).status === 200, { message: "gpu routes" });
    const job = await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command: "echo queued" } });
    expect(job.status).toBe(201);
    const queued = await scrapeUntil("queued job", (s) => value(s, "platform_gpu_queue_depth") === 1);
    expect(value(queued, "platform_gpu_jobs", { status: "queued" })).toBe(1);
    expect(value(queued, "platform_gpu_jobs", { status: "running" })).toBe(0);
    expect(value(queued, "platform_gpu_jobs", { status: "completed" })).toBe(0);

    await waitFor(async () => (await http(platform.baseUrl, "GET", "/api/databases", { token })).status === 200, { message: "db routes" });
    const db = await http(platform.baseUrl, "POST", "/api/databases", { token });
    expect(db.status).toBe(201);
    try {
      const created = await scrapeUntil("active database", (s) => value(s, "platform_databases", { state: "active" }) === 1);
      expect(value(created, "platform_databases_storage_mb", { state: "active" })).toBeGreaterThanOrEqual(0);
    } finally {
      expect((await http(platform.baseUrl, "DELETE", `/api/databases/${db.body.id}`, { token })).status).toBe(200);
    }
    await scrapeUntil("database gone", (s) => value(s, "platform_databases", { state: "active" }) === 0);
  });
});

describe("ops - GPU metrics from a real gpu-node", () => {
  let platform: TestPlatform;

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["metrics", "gpu-node"],
      env: { GPU_EXECUTOR: "process", GPU_SIMULATE: "Ops Test Card:8192,Ops Test Card:8192", GPU_HEARTBEAT_S: "0.2" },
    });
  });

  afterAll(() => platform?.stop());

  it("ops - the node's heartbeats become one series per card", async () => {
    const port = await waitFor(() => metricsPortOf(platform.broker), { message: "metrics port" });
    const samples = await waitFor(
      async () => {
        const s = parsePrometheus(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
        return find(s, "platform_gpu_memory_total_mib", { card: "Ops Test Card" }).length === 2 ? s : false;
      },
      { message: "simulated cards in the metrics" },
    );
    const cards = find(samples, "platform_gpu_memory_total_mib", { card: "Ops Test Card" });
    expect(cards.map((c) => c.value)).toEqual([8192, 8192]);
    expect(cards.map((c) => c.labels.index).sort()).toEqual(["0", "1"]);
    expect(new Set(cards.map((c) => c.labels.gpu)).size).toBe(2);
    expect(cards.every((c) => c.labels.node === platform.broker.nodeID)).toBe(true);
  });
});
