/**
 * Usage through the HTTP gateway (API-DECISIONS "Usage, quotas and operators"): gateway, auth,
 * gpu-scheduler, a real gpu-node (process executor, one simulated card), inference (Ollama
 * stand-in) and usage in one process. What GET /api/usage says equals what each response said:
 * the jobs' gpuSecondsUsed, the inferences' tokensUsed; an abandoned stream counts what it
 * generated; GET /api/quotas in the contract's shape; bad windows are 400.
 */
import { estimateTokens } from "../../services/inference/model-info";
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { OllamaStandin } from "../support/provider-standins";
import { openSse } from "../support/sse";
import { gpuTestUser, http, startTestPlatform, TestPlatform, waitFor } from "../support/platform";

describe("usage - through the gateway", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let base: string;
  let token: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "usage-api-"));
  const usage = async (query = "") => (await http(base, "GET", `/api/usage${query}`, { token })).body;

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "inference", "usage"],
      env: {
        OLLAMA_URL: ollama.url,
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: "Test GPU:1024",
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
        CREDITS_PER_GPU_SECOND: "2",
        CREDITS_PER_1K_TOKENS: '{"default": 1, "qwen": 10}',
      },
    });
    base = platform.baseUrl;
    token = await gpuTestUser(base);
  });

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("usage - a new account has used nothing this month", async () => {
    const res = await http(base, "GET", "/api/usage", { token });
    expect(res.status).toBe(200);
    const now = new Date();
    expect(res.body).toEqual({
      from: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
      to: expect.any(String),
      gpu: { jobs: 0, gpuSeconds: 0, byGpuType: {} },
      inference: { requests: 0, tokens: 0, byModel: {} },
      databases: { active: 0, storageMb: 0, storageMbHours: 0 },
      credits: 0,
    });
  });

  it("usage - tokens equal the sum of tokensUsed answered, per model, priced per model; an abandoned stream counts what it generated", async () => {
    const answered: number[] = [];
    for (const [model, prompt] of [
      ["llama3.2:1b", "one"],
      ["qwen2.5:0.5b", "two"],
      ["llama3.2:1b", "three"],
    ]) {
      ollama.set({ promptTokens: 10 + prompt.length, completionTokens: 3 });
      const res = await http(base, "POST", "/api/models/infer", { token, body: { model, prompt } });
      expect(res.status).toBe(200);
      answered.push(res.body.tokensUsed);
    }
    ollama.set({ promptTokens: 5, completionTokens: 4 });
    const stream = await openSse(`${base}/api/models/infer`, { token, body: { model: "llama3.2:1b", prompt: "s", stream: true } });
    const events = await stream.rest();
    answered.push(events.at(-1).tokensUsed);
    // A stream the client leaves after two chunks: the two tokens generated count, and its prompt (estimated: the provider never counted it).
    ollama.set({ chunks: ["a", "b", "c", "d"], gated: true });
    const left = await openSse(`${base}/api/models/infer`, { token, body: { model: "qwen2.5:0.5b", prompt: "x", stream: true } });
    // The first chunk comes ungated, the second on release; the third waits for a release that never comes.
    await left.next();
    ollama.release();
    await left.next();
    left.close();
    const total = answered.reduce((a, b) => a + b, 0);
    const abandoned = estimateTokens("x") + 2;
    const body = await waitFor(
      async () => {
        const u = await usage();
        return u.inference.requests === 5 ? u : false;
      },
      { message: "five inferences in the usage" },
    );
    expect(body.inference.tokens).toBe(total + abandoned);
    expect(body.inference.byModel).toEqual({ "llama3.2:1b": answered[0] + answered[2] + answered[3], "qwen2.5:0.5b": answered[1] + abandoned });
    expect(body.credits).toBeCloseTo(((answered[0] + answered[2] + answered[3]) / 1000) * 1 + ((answered[1] + abandoned) / 1000) * 10, 6);
  });

  it("usage - GPU-seconds equal the gpuSecondsUsed of the jobs, per GPU type, priced per second", async () => {
    const before = await usage();
    const ids: string[] = [];
    for (const command of ["sleep 0.3", "sleep 0.2; exit 3"]) {
      const res = await http(base, "POST", "/api/gpu/jobs", { token, body: { command } });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    const ended = await Promise.all(
      ids.map((id) =>
        waitFor(
          async () => {
            const job = (await http(base, "GET", `/api/gpu/jobs/${id}`, { token })).body;
            return ["completed", "failed"].includes(job.status) ? job : false;
          },
          { message: `job ${id} ended`, timeoutMs: 20_000 },
        ),
      ),
    );
    const seconds = ended.reduce((a, j) => a + j.gpuSecondsUsed, 0);
    expect(seconds).toBeGreaterThan(0.4);
    const after = await waitFor(
      async () => {
        const u = await usage();
        return u.gpu.jobs === before.gpu.jobs + 2 ? u : false;
      },
      { message: "two jobs in the usage" },
    );
    expect(after.gpu.gpuSeconds - before.gpu.gpuSeconds).toBeCloseTo(seconds, 2);
    expect(Object.keys(after.gpu.byGpuType)).toEqual(["Test GPU"]);
    expect(after.credits - before.credits).toBeCloseTo(seconds * 2, 1);
    // A window that ended before the jobs: none of them.
    const earlier = await usage(`?to=${encodeURIComponent(new Date(Date.now() - 3600_000).toISOString())}`);
    expect(earlier.gpu.gpuSeconds).toBe(0);
  });

  it.each([
    ["from not a date", "?from=yesterday", "from"],
    ["to not a date", "?to=12", "to"],
    ["to before from", "?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z", "to"],
    ["a window over 367 days", "?from=2020-01-01T00:00:00Z&to=2030-01-01T00:00:00Z", "to"],
  ])("usage - bad window: %s is 400 VALIDATION_FAILED naming the field", async (_name, query, field) => {
    const res = await http(base, "GET", `/api/usage${query}`, { token });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details[0].field).toBe(field);
  });

  it("usage - without credentials both routes are 401", async () => {
    expect((await http(base, "GET", "/api/usage")).status).toBe(401);
    expect((await http(base, "GET", "/api/quotas")).status).toBe(401);
  });

  it("usage - GET /api/quotas lists every resource in the contract's shape, monthly ones resetting at the next UTC month", async () => {
    const res = await http(base, "GET", "/api/quotas", { token });
    expect(res.status).toBe(200);
    const now = new Date();
    const resetsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
    const byResource = Object.fromEntries(res.body.quotas.map((q: any) => [q.resource, q]));
    expect(Object.keys(byResource)).toEqual(["credits", "gpuSeconds", "tokens", "databases", "storageMb", "runningGpus", "queuedJobs"]);
    expect(byResource.tokens).toEqual({ resource: "tokens", period: "month", limit: null, used: expect.any(Number), resetsAt });
    expect(byResource.tokens.used).toBeGreaterThan(0);
    expect(byResource.queuedJobs).toEqual({ resource: "queuedJobs", period: null, limit: 1000, used: 0, resetsAt: null });
    expect(byResource.databases).toEqual({ resource: "databases", period: null, limit: 5, used: 0, resetsAt: null });
  });
});
