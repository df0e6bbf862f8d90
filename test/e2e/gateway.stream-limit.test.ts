/**
 * GATEWAY_STREAMS_PER_ACCOUNT through the gateway (services/api-gateway/stream-slots.ts): an
 * account holding its limit of open streams (events, logs, artifacts) gets 429 RATE_LIMITED for
 * one more, before any service is called, while its other requests and other accounts go on; a
 * stream that closes, however it ends, gives its slot back. Gateway, auth, gpu-scheduler and a
 * real gpu-node (process executor, one simulated card) in one process; then streamed inference
 * (/api/models/infer and /v1 with the official openai client) against a gated provider stand-in.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { InferencePlatform, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { clientIdOf, gpuTestUser, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { EventStreamReader, openEventStream, openSse } from "../support/sse";

const LIMIT = 2;
describe("gateway - open streams per account", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "stream-limit-"));
  const open: EventStreamReader[] = [];

  const submit = (token: string, command: string) => http(base, "POST", "/api/gpu/jobs", { token, body: { command } });
  const watch = async (id: string, token: string) => {
    const stream = await openEventStream(`${base}/api/gpu/jobs/${id}/events`, token);
    open.push(stream);
    return stream;
  };
  const watcherCount = () => (platform.broker.getLocalService("gpu-scheduler") as any).app.watch.size as number;
  const held = (token: string) => (platform.broker.getLocalService("api-gateway") as any).streams.held(clientIdOf(token)) as number;

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: sandboxedGpuEnv(work, { GATEWAY_STREAMS_PER_ACCOUNT: String(LIMIT), GPU_EVENTS_KEEPALIVE_MS: "300" }),
    });
    base = platform.baseUrl;
    alice = await gpuTestUser(base);
    bob = await gpuTestUser(base);
  });

  afterAll(async () => {
    for (const stream of open) stream.close();
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("gateway streams - the limit's worth of open streams, then 429 for one more of any kind; other requests and accounts go on; a closed stream frees its slot", async () => {
    const job = (await submit(alice, "sleep 60")).body;
    const streams = [await watch(job.id, alice), await watch(job.id, alice)];
    for (const stream of streams) {
      expect(stream.response.status).toBe(200);
      expect((await stream.next())?.event).toBe("status");
    }
    expect(held(alice)).toBe(LIMIT);

    for (const url of [`/api/gpu/jobs/${job.id}/events`, `/api/gpu/jobs/${job.id}/logs`, `/api/gpu/jobs/${job.id}/logs?follow=true`]) {
      const refused = await http(base, "GET", url, { token: alice });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(refused.body.error).toMatchObject({ code: "RATE_LIMITED", details: { resource: "streams", limit: LIMIT, used: LIMIT } });
    }
    // Refused before any call: no watcher was added on the scheduler, and no slot is held for them.
    // Each open stream has at most one page waiting there (between pages, none): more is a refused one's.
    expect(watcherCount()).toBeLessThanOrEqual(LIMIT);
    expect(held(alice)).toBe(LIMIT);

    // The account's other requests, and another account's streams, are not limited by it.
    expect((await http(base, "GET", `/api/gpu/jobs/${job.id}`, { token: alice })).status).toBe(200);
    const bobJob = (await submit(bob, "true")).body;
    const bobs = await watch(bobJob.id, bob);
    expect(bobs.response.status).toBe(200);

    // A client leaving gives the slot back: the next stream opens.
    streams[0].close();
    await waitFor(() => held(alice) === LIMIT - 1, { message: "the closed stream's slot to come back" });
    const again = await watch(job.id, alice);
    expect(again.response.status).toBe(200);
    expect((await again.next())?.event).toBe("status");

    // Streams that end by themselves (the job cancelled: their last event) give theirs back too.
    expect((await http(base, "POST", `/api/gpu/jobs/${job.id}/cancel`, { token: alice })).status).toBe(200);
    await waitFor(() => held(alice) === 0, { message: "every ended stream's slot to come back", timeoutMs: 15_000 });
    await waitFor(() => held(bob) === 0, { message: "bob's finished stream's slot to come back", timeoutMs: 15_000 });
  });

  it("gateway streams - requests that fail (an unknown job, no credentials) hold nothing after their answer", async () => {
    for (let i = 0; i < LIMIT + 2; i++) {
      const res = await http(base, "GET", "/api/gpu/jobs/7b0c1f9e-1111-4111-8111-111111111111/events", { token: alice });
      expect(res.status).toBe(404);
    }
    expect((await http(base, "GET", "/api/gpu/jobs/7b0c1f9e-1111-4111-8111-111111111111/logs")).status).toBe(401);
    await waitFor(() => held(alice) === 0, { message: "no slot held by the answered requests" });
    const job = (await submit(alice, "true")).body;
    await waitFor(async () => (await http(base, "GET", `/api/gpu/jobs/${job.id}`, { token: alice })).body.status === "completed", { message: "completed" });
    const logs = await http(base, "GET", `/api/gpu/jobs/${job.id}/logs`, { token: alice });
    expect(logs.status).toBe(200);
  });
});

describe("gateway - open streams per account: streamed inference", () => {
  let p: InferencePlatform;
  const held = () => (p.platform.broker.getLocalService("api-gateway") as any).streams.held(clientIdOf(p.token)) as number;
  const hi = [{ role: "user" as const, content: "hi" }];

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    p = await startInferencePlatform({ GATEWAY_STREAMS_PER_ACCOUNT: "1" });
  });
  afterAll(() => p?.stop());

  it("gateway streams - a streamed answer holds the slot: one more stream on either API is 429 (the provider never asked), answers that are not streamed go on", async () => {
    p.ollama.set({ gated: true, chunks: ["one", "two"] });
    const stream = await openSse(`${p.platform.baseUrl}/api/models/infer`, { token: p.token, body: { model: "llama3.2:1b", prompt: "hi", stream: true } });
    expect((await stream.next()).delta).toBe("one");
    expect(held()).toBe(1);
    const asked = p.ollama.requests.length;

    const refused = await http(p.platform.baseUrl, "POST", "/api/models/infer", { token: p.token, body: { model: "llama3.2:1b", prompt: "hi", stream: true } });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: "RATE_LIMITED", details: { resource: "streams", limit: 1, used: 1 } });
    const v1 = await openAiErrorOf(p.client.chat.completions.create({ model: "llama3.2:1b", messages: hi, stream: true }));
    expect(v1.status).toBe(429);
    expect(p.ollama.requests.length).toBe(asked);

    // Not streamed: no slot wanted.
    const whole = await p.client.chat.completions.create({ model: "llama3.2:1b", messages: hi });
    expect(whole.choices[0].message.content).toBe("onetwo");

    // The stream ends: its slot comes back, and a /v1 stream opens.
    p.ollama.release(2);
    expect(await stream.rest()).toContainEqual(expect.objectContaining({ done: true }));
    await waitFor(() => held() === 0, { message: "the ended stream's slot to come back" });
    p.ollama.set({});
    const chunks: string[] = [];
    for await (const chunk of await p.client.chat.completions.create({ model: "llama3.2:1b", messages: hi, stream: true }))
      chunks.push(chunk.choices[0]?.delta?.content ?? "");
    expect(chunks.join("")).toBe("Hello, world!");
  });
});
