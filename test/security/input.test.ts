/**
 * Input that cannot hurt others, replayed against the real platform and PostgreSQL: NUL bytes and
 * unpaired surrogates in any string field of any route are 400 VALIDATION_FAILED naming the field,
 * with nothing stored and no provider called; and a batched write that PostgreSQL refuses for one
 * member fails that member only (reached by pushing into the batchers directly, since the
 * validation now stops such input earlier).
 */
import { randomUUID } from "crypto";
import { Client } from "pg";
import type { Pool } from "pg";
import type { SchedulerApp } from "../../services/gpu-scheduler/app";
import type { NewJob } from "../../services/gpu-scheduler/store/job-row";
import type { InferenceRecord } from "../../services/inference/attempt-log";
import { InferencesRepository, UsageRecorder } from "../../services/inference/usage.repository";
import { tenantEnv } from "../integration/dbaas.helpers";
import { OllamaStandin } from "../support/provider-standins";
import { http, startTestPlatform, TestPlatform, waitForRoute } from "../support/platform";

const NUL = "\u0000";
const LONE_HIGH = "\ud800";
const LONE_LOW = "\udc00";
const MODEL = "llama3.2:1b";

describe("input - strings PostgreSQL cannot store never reach a service or a batch", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let db: Client;
  let token: string;
  let clientId: string;

  const counts = async () => {
    const { rows } = await db.query<{ clients: number; jobs: number; inferences: number; databases: number }>(
      `SELECT (SELECT count(*) FROM auth.clients)::int AS clients, (SELECT count(*) FROM gpu_scheduler.jobs)::int AS jobs,
              (SELECT count(*) FROM inference.inferences)::int AS inferences, (SELECT count(*) FROM dbaas.databases)::int AS databases`,
    );
    return { ...rows[0], providerCalls: ollama.requests.length };
  };

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "inference", "dbaas"],
      env: { ...tenantEnv(), OLLAMA_URL: ollama.url },
    });
    for (const route of ["/api/auth/register", "/api/gpu/jobs", "/api/models/infer", "/api/databases"]) await waitForRoute(platform.baseUrl, "POST", route);
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `input-${Date.now()}@example.com`, name: "Input", password: "correct horse battery" },
    });
    expect(reg.status).toBe(201);
    token = reg.body.accessToken;
    clientId = reg.body.client.id;
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
    await ollama?.stop();
  });

  const register = (over: Record<string, string>) => ({ email: `r-${randomUUID()}@example.com`, name: "Someone", password: "correct horse battery", ...over });
  const login = (over: Record<string, string>) => ({ email: "someone@example.com", password: "correct horse battery", ...over });
  const job = (over: Record<string, string>) => ({ command: "echo fine", ...over });
  const infer = (over: Record<string, string>) => ({ model: MODEL, prompt: "hello", ...over });

  // [route, body, field named in details, authenticated]
  const table: Array<[string, string, () => Record<string, unknown>, string, boolean]> = [
    ["register e-mail", "/api/auth/register", () => register({ email: `a${NUL}@example.com` }), "email", false],
    ["register name", "/api/auth/register", () => register({ name: `Eve${NUL}` }), "name", false],
    ["register password", "/api/auth/register", () => register({ password: `correct horse${NUL}battery` }), "password", false],
    ["register name, lone high surrogate", "/api/auth/register", () => register({ name: `Eve${LONE_HIGH}` }), "name", false],
    ["register name, lone low surrogate", "/api/auth/register", () => register({ name: `${LONE_LOW}Eve` }), "name", false],
    ["login e-mail", "/api/auth/login", () => login({ email: `victim${NUL}@example.com` }), "email", false],
    ["login password", "/api/auth/login", () => login({ password: `x${NUL}` }), "password", false],
    ['job command "echo \\u0000"', "/api/gpu/jobs", () => job({ command: `echo ${NUL}` }), "command", true],
    ["job command, lone surrogate", "/api/gpu/jobs", () => job({ command: `echo ${LONE_HIGH}` }), "command", true],
    ["job gpuType", "/api/gpu/jobs", () => job({ gpuType: `RTX${NUL}` }), "gpuType", true],
    ["job containerImage", "/api/gpu/jobs", () => job({ containerImage: `busybox${NUL}` }), "containerImage", true],
    ["infer model", "/api/models/infer", () => infer({ model: `${MODEL}${NUL}` }), "model", true],
    ["infer prompt", "/api/models/infer", () => infer({ prompt: `hi${NUL}` }), "prompt", true],
    ["infer prompt, lone surrogate", "/api/models/infer", () => infer({ prompt: `hi${LONE_LOW}` }), "prompt", true],
    ["infer systemPrompt", "/api/models/infer", () => infer({ systemPrompt: `be${NUL}` }), "systemPrompt", true],
    ["databases, any field", "/api/databases", () => ({ note: `x${NUL}` }), "note", true],
    ["a nested field", "/api/gpu/jobs", () => ({ ...job({}), extra: { list: ["ok", `bad${NUL}`] } }), "extra.list[1]", true],
    ["a field name", "/api/models/infer", () => ({ ...infer({}), [`we${NUL}ird`]: 1 }), `we${NUL}ird`, true],
  ];

  it.each(table)(
    "input - a NUL or unpaired surrogate in %s is 400 naming the field, and nothing is stored or called",
    async (_name, route, body, field, authed) => {
      const before = await counts();
      const res = await http(platform.baseUrl, "POST", route, { body: body(), ...(authed ? { token } : {}) });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("VALIDATION_FAILED");
      expect(res.body.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
      expect(res.headers.get("x-request-id")).toBeTruthy();
      expect(await counts()).toEqual(before);
    },
  );

  it("input - a NUL in a query string or a path parameter is 400, not a database error", async () => {
    const query = await http(platform.baseUrl, "GET", "/api/gpu/jobs?filter=a%00b", { token });
    expect(query.status).toBe(400);
    expect(query.body.error.details).toEqual([expect.objectContaining({ field: "filter" })]);
    const path = await http(platform.baseUrl, "GET", "/api/gpu/jobs/a%00b", { token });
    expect(path.status).toBe(400);
    expect(path.body.error.details).toEqual([expect.objectContaining({ field: "id" })]);
  });

  it("input - a call straight over the bus (no gateway) with a NUL is refused by the middleware too", async () => {
    const before = await counts();
    await expect(platform.broker.call("auth.login", { email: `a${NUL}@example.com`, password: "correct horse battery" })).rejects.toMatchObject({
      code: 400,
      type: "VALIDATION_FAILED",
      data: [expect.objectContaining({ field: "email" })],
    });
    await expect(platform.broker.call("auth.register", register({ name: `x${LONE_HIGH}` }))).rejects.toMatchObject({ code: 400 });
    expect(await counts()).toEqual(before);
  });

  it("input - well-formed text beyond the BMP (surrogate pairs) and other control characters are accepted", async () => {
    const res = await http(platform.baseUrl, "POST", "/api/auth/register", { body: register({ name: "Zoë 😀 \u0007 𝄞" }) });
    expect(res.status).toBe(201);
    expect(res.body.client.name).toBe("Zoë 😀 \u0007 𝄞");
    const created = await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command: "echo '😀'" } });
    expect(created.status).toBe(201);
  });

  it("input - 19 concurrent submitters and one job PostgreSQL refuses in the same batch: only that one fails (400), the 19 are stored", async () => {
    const { app: scheduler } = platform.broker.getLocalService("gpu-scheduler") as unknown as { app: Pick<SchedulerApp, "inserts"> };
    const jobs: NewJob[] = Array.from({ length: 20 }, (_, i) => ({
      id: randomUUID(),
      clientId,
      spec: { command: i === 7 ? `echo ${NUL}` : `echo submitter ${i}`, timeoutSeconds: 3600 },
    }));
    // Pushed in one tick: one batch, as concurrent requests are.
    const outcomes = await Promise.allSettled(jobs.map((j) => scheduler.inserts.push(j)));
    const bad = outcomes[7];
    expect(bad.status).toBe("rejected");
    expect((bad as PromiseRejectedResult).reason).toMatchObject({ code: 400, type: "VALIDATION_FAILED" });
    expect(JSON.stringify((bad as PromiseRejectedResult).reason.data)).not.toMatch(/0x00|UTF8|gpu_scheduler/);
    const good = outcomes.filter((_, i) => i !== 7);
    expect(good.every((o) => o.status === "fulfilled" && "position" in o.value && Number.isInteger(o.value.position))).toBe(true);
    const { rows } = await db.query<{ id: string }>("SELECT id FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[])", [jobs.map((j) => j.id)]);
    expect(rows.map((r) => r.id).sort()).toEqual(
      jobs
        .filter((_, i) => i !== 7)
        .map((j) => j.id)
        .sort(),
    );
  });

  it("input - a usage batch with one record PostgreSQL refuses loses only that record", async () => {
    const pool = (platform.broker.getLocalService("inference") as unknown as { db: Pool }).db;
    const lost: number[] = [];
    const recorder = new UsageRecorder(new InferencesRepository(pool), (_err, n) => lost.push(n), { maxBatch: 1000, flushMs: 60_000 });
    const records: InferenceRecord[] = Array.from({ length: 20 }, (_, i) => ({
      id: randomUUID(),
      clientId,
      model: i === 3 ? `bad${NUL}model` : MODEL,
      provider: "ollama",
      promptTokens: 1,
      completionTokens: 1,
      tokensUsed: 2,
      durationMs: 5,
      outcome: "ok" as InferenceRecord["outcome"],
      errorCode: null,
      stream: false,
    }));
    for (const r of records) recorder.add(r);
    await recorder.flush();
    expect(lost).toEqual([1]);
    const { rows } = await db.query<{ id: string }>("SELECT id FROM inference.inferences WHERE id = ANY($1::uuid[])", [records.map((r) => r.id)]);
    expect(rows.map((r) => r.id).sort()).toEqual(
      records
        .filter((_, i) => i !== 3)
        .map((r) => r.id)
        .sort(),
    );
  });
});
