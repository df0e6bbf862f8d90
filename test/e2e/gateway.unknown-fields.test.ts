/**
 * Unknown request fields through the HTTP gateway (API-DECISIONS Part 3), with gateway, auth,
 * gpu-scheduler, dbaas and inference running: on /api a field the platform does not know is 400
 * VALIDATION_FAILED naming it and nothing is created; path and query params still reach the
 * actions; on /v1 it is OpenAI's invalid_request_error with `param`, except the fields OpenAI's
 * clients send that the platform documents as ignored, and the official client still works.
 */
import { randomUUID } from "crypto";
import OpenAI from "openai";
import { InferencePlatform, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { http, HttpResult, waitForRoute } from "../support/platform";

describe("gateway - unknown request fields", () => {
  let p: InferencePlatform;
  let base: string;
  const as = (method: string, path: string, body?: unknown) => http(base, method, path, { token: p.token, body });
  const providerCalls = () => p.ollama.requests.length + p.vllm.requests.length;

  function expectUnknown(res: HttpResult, field: string) {
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      code: "VALIDATION_FAILED",
      message: expect.any(String),
      details: [{ field, message: expect.stringContaining("is not a known field") }],
    });
  }

  beforeAll(async () => {
    p = await startInferencePlatform({}, { services: ["api-gateway", "auth", "inference", "gpu-scheduler", "dbaas"] });
    base = p.platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/databases");
  });
  afterAll(() => p?.stop());

  test("gateway - a GPU job with a control this server does not have is refused by name, and no job is queued", async () => {
    const before = (await as("GET", "/api/gpu/jobs")).body.jobs;
    expectUnknown(await as("POST", "/api/gpu/jobs", { command: "echo hi", reservation: randomUUID() }), "reservation");
    // A known control with an unknown field inside it: named by its path.
    expectUnknown(
      await as("POST", "/api/gpu/jobs", { command: "echo hi", dependsOn: [{ jobId: randomUUID(), condition: "finished", after: 1 }] }),
      "dependsOn[0].after",
    );
    expectUnknown(await as("POST", "/api/gpu/jobs", { command: "echo hi", nodeSelector: { zone: "a" }, timeoutSeconds: 60 }), "nodeSelector");
    // The caller is checked first: without credentials it stays 401.
    const anonymous = await http(base, "POST", "/api/gpu/jobs", { body: { command: "echo hi", reservation: "x" } });
    expect([anonymous.status, anonymous.body.error.code]).toEqual([401, "UNAUTHORIZED"]);
    expect((await as("GET", "/api/gpu/jobs")).body.jobs).toEqual(before);
    expect((await as("POST", "/api/gpu/jobs", { command: "echo hi", env: { ANY_NAME: "v" } })).status).toBe(201);
  });

  test("gateway - path ids and known query params still reach the action, converted; an unknown query param is refused", async () => {
    const { id } = (await as("POST", "/api/gpu/jobs", { command: "echo hi" })).body;
    expect((await as("GET", `/api/gpu/jobs/${id}`)).body).toMatchObject({ id, status: "queued" });
    // follow=true and attempt=2 arrive as a boolean and a number: the queued job has no second attempt.
    const followed = await as("GET", `/api/gpu/jobs/${id}/logs?follow=true&attempt=2`);
    expect([followed.status, followed.body.error?.message]).toEqual([404, expect.stringContaining("Attempt 2")]);
    const bad = await as("GET", `/api/gpu/jobs/${id}/logs?attempt=two`);
    expect([bad.status, bad.body.error.details[0].field]).toEqual([400, "attempt"]);
    expectUnknown(await as("GET", `/api/gpu/jobs/${id}/logs?attempt=1&tail=5`), "tail");
    expectUnknown(await as("GET", "/api/gpu/jobs?page=2"), "page");
  });

  test("gateway - a database create with an unknown field is refused by name, and no database is made", async () => {
    const before = await as("GET", "/api/databases");
    expect(before.status).toBe(200);
    expectUnknown(await as("POST", "/api/databases", { maxStorageMb: 100, region: "eu-west" }), "region");
    expect((await as("GET", "/api/databases")).body).toEqual(before.body);
  });

  test("gateway - an auth call with an unknown field is refused by name, and no account is made", async () => {
    const email = `unknown-${randomUUID()}@example.com`;
    const account = { email, name: "Unknown", password: "password-123" };
    expectUnknown(await http(base, "POST", "/api/auth/register", { body: { ...account, role: "admin" } }), "role");
    expect((await http(base, "POST", "/api/auth/register", { body: account })).status).toBe(201);
    expectUnknown(await http(base, "POST", "/api/auth/login", { body: { email, password: "password-123", remember: true } }), "remember");
    expectUnknown(await as("POST", "/api/auth/api-keys", { name: "ci" }), "name");
  });

  test("gateway - /v1: an unknown field is OpenAI's invalid_request_error naming it, and no provider is asked", async () => {
    const calls = providerCalls();
    const err = await openAiErrorOf(
      p.client.chat.completions.create({ model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], top_k: 40 } as never),
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toEqual({
      message: "Unrecognized request argument supplied: top_k",
      type: "invalid_request_error",
      param: "top_k",
      code: "validation_failed",
    });
    const embed = await openAiErrorOf(p.client.embeddings.create({ model: "qwen2.5:0.5b", input: "x", truncate: true } as never));
    expect([embed.status, (embed.error as { param?: string }).param]).toEqual([400, "truncate"]);
    expect(providerCalls()).toBe(calls);
  });

  test("gateway - /v1: fields OpenAI's clients send that are documented as ignored are accepted; the client works for chat and embeddings", async () => {
    const completion = await p.client.chat.completions.create({
      model: "llama3.2:1b",
      messages: [{ role: "user", content: "hi" }],
      store: false,
      metadata: { run: "1" },
      service_tier: "auto",
      frequency_penalty: 0,
      presence_penalty: 0,
      parallel_tool_calls: false,
      user: "end-user",
      n: 1,
      seed: 1,
    });
    expect(completion.choices[0].message.content).toBe("Hello, world!");
    const embeddings = await p.client.embeddings.create({ model: "qwen2.5:0.5b", input: ["a", "b"], user: "end-user" });
    expect(embeddings.data).toHaveLength(2);
  });
});
