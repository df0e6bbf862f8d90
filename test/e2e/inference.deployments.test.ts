/**
 * Model deployments (issue 29, API-DECISIONS "Model deployments") through the gateway: gateway,
 * auth, gpu-scheduler, a real gpu-node (process executor, bubblewrap sandbox, two simulated cards),
 * inference and usage in one process. The replica is a real job: a small OpenAI-compatible server
 * (test/fixtures/deployments) in its sandbox with no network, reached through its node's serve
 * relay (over its direct serve channel). The official `openai` client calls it by the deployment's name: a cold start (held, then
 * marked), chat, a stream chunk by chunk, embeddings; the model sent on is the replica's own id;
 * usage by the name. A replica that exits is replaced; load starts a second one and the next
 * request goes there; idle, they stop; a never-ready server fails the deployment with its reason.
 * The resource's rules: defaults, ranges, unknown fields, 409s, another account's 404, scopes.
 * The caller's rate limits (requests, and the tokens the replica reports) and monthly token quota
 * apply to deployment traffic as to any model. A fallback to a cold deployment waits for its replica.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import OpenAI from "openai";
import { freePort, http, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";
import { replicaCommand } from "../fixtures/deployments/replica";

const PORT = 8000;

/** The host pids of the test replicas' servers started with REPLICA_TAG=`tag` (node processes in their sandboxes). */
function replicaServerPids(tag: string): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
        return env.includes(`REPLICA_TAG=${tag}`) && readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "node";
      } catch {
        return false;
      }
    })
    .map(Number);
}
const ADMIN_EMAIL = "deployments-admin@example.com";
/** A well-formed deployment id (of none). */
const ANY_DEPLOYMENT_ID = "00000000-0000-4000-8000-000000000000";

describe("model deployments - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "deployments-"));

  const signUp = async (name: string, email = `${name}-${Date.now()}@example.com`) =>
    (await http(base, "POST", "/api/auth/register", { body: { email, name, password: "correct horse battery" } })).body;
  const register = async (name: string) => (await signUp(name)).accessToken as string;
  const create = (body: Record<string, unknown>, token = alice) => http(base, "POST", "/api/deployments", { token, body });
  const client = (token = alice) => new OpenAI({ baseURL: `${base}/v1`, apiKey: token, maxRetries: 0 });

  beforeAll(async () => {
    const port = await freePort();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "inference", "usage", "admin"],
      env: {
        PORT: String(port),
        ADMIN_EMAILS: ADMIN_EMAIL,
        QUOTA_CACHE_MS: "0",
        OLLAMA_URL: "off",
        DEPLOYMENTS_TICK_MS: "200",
        // Requests reach the replicas over the node's direct serve channel (the bus tunnel: inference.deployments.restart).
        GPU_SERVE_LISTEN: "127.0.0.1:0",
        ...sandboxedGpuEnv(work, { GPU_SIMULATE: "Test GPU:1024,Test GPU:1024" }),
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/deployments");
    [alice, bob] = [await register("alice"), await register("bob")];
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body?.cluster?.totalGpus === 2, {
      message: "the cards announced",
    });
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("deployments - a replica job serves chat, a stream and embeddings through its node, after a cold start", async () => {
    const made = await create({ name: "echo", command: replicaCommand(PORT, { REPLICA_TAG: "a", CHUNK_DELAY_MS: "100" }), port: PORT, idleTimeoutSeconds: 60 });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      name: "echo",
      model: "echo",
      status: "idle",
      statusReason: null,
      replicas: { desired: 0, starting: 0, ready: 0 },
      port: PORT,
      readinessPath: "/v1/models",
      minReplicas: 0,
      maxReplicas: 1,
      targetInflight: 4,
      idleTimeoutSeconds: 60,
      coldStartTimeoutSeconds: 600,
      gpuCount: 1,
    });
    const id = made.body.id as string;

    // The owner's model lists show it; another account's do not.
    const listed = await client().models.list();
    expect(listed.data.map((m) => m.id)).toContain("echo");
    expect((await http(base, "GET", "/api/models", { token: alice })).body.models).toContainEqual(
      expect.objectContaining({ name: "echo", provider: "deployment" }),
    );
    expect((await client(bob).models.list()).data.map((m) => m.id)).not.toContain("echo");

    // Cold start: the first request waits for the replica, and says so.
    const first = await client()
      .chat.completions.create({ model: "echo", messages: [{ role: "user", content: "hello there" }] })
      .withResponse();
    expect(first.response.headers.get("x-ci-cold-start")).toBe("true");
    expect(first.data.choices[0].message.content).toBe("echo: hello there");
    expect(first.data.model).toBe("echo");

    // Warm: no mark. The model sent on is the replica's own first /v1/models id.
    const warm = await client()
      .chat.completions.create({ model: "echo", messages: [{ role: "user", content: "model?" }] })
      .withResponse();
    expect(warm.response.headers.get("x-ci-cold-start")).toBeNull();
    expect(warm.data.choices[0].message.content).toMatch(/^model: tiny-a server: /);
    // Over the node's direct channel, not the bus tunnel.
    expect((platform.broker.getLocalService("gpu-node") as unknown as { direct: { served: number } }).direct.served).toBeGreaterThan(0);

    // A stream arrives chunk by chunk.
    const stream = await client().chat.completions.create({ model: "echo", stream: true, messages: [{ role: "user", content: "one two three four" }] });
    const deltas: string[] = [];
    const arrived: number[] = [];
    for await (const chunk of stream)
      if (chunk.choices[0]?.delta?.content) {
        deltas.push(chunk.choices[0].delta.content);
        arrived.push(Date.now());
      }
    expect(deltas.join("")).toBe("echo: one two three four");
    expect(deltas.length).toBe(5);
    // The replica writes a word every 100 ms: they arrive as written, not at the end all at once.
    expect(arrived[4] - arrived[0]).toBeGreaterThan(250);

    const vectors = await client().embeddings.create({ model: "echo", input: ["abc", "hello"] });
    expect(vectors.data.map((d) => d.embedding)).toEqual([
      [3, "tiny-a".length],
      [5, "tiny-a".length],
    ]);

    const infer = await http(base, "POST", "/api/models/infer", { token: alice, body: { model: "echo", prompt: "via infer" } });
    expect([infer.status, infer.body.response]).toEqual([200, "echo: via infer"]);

    // The replica is a job of the owner, with its deploymentId; the deployment reads ready.
    const jobs = (await http(base, "GET", `/api/gpu/jobs?deploymentId=${id}`, { token: alice })).body.jobs;
    expect(jobs).toEqual([expect.objectContaining({ deploymentId: id, status: "running" })]);
    expect((await http(base, "GET", `/api/gpu/jobs?deploymentId=${id}`, { token: bob })).body.jobs).toEqual([]);
    const shown = (await http(base, "GET", `/api/deployments/${id}`, { token: alice })).body;
    expect(shown).toMatchObject({ status: "ready", replicas: { desired: 1, ready: 1, starting: 0 } });

    // A replica that exits is replaced; the next request is answered by the new one.
    expect((await http(base, "POST", `/api/gpu/jobs/${jobs[0].id}/cancel`, { token: alice })).status).toBe(200);
    const replaced = await waitFor(
      async () => {
        const all = (await http(base, "GET", `/api/gpu/jobs?deploymentId=${id}`, { token: alice })).body.jobs;
        const d = (await http(base, "GET", `/api/deployments/${id}`, { token: alice })).body;
        return all.length === 2 && d.replicas.ready === 1 && all.find((j: { id: string }) => j.id !== jobs[0].id);
      },
      { timeoutMs: 20_000, message: "a new replica ready" },
    );
    const after = await client().chat.completions.create({ model: "echo", messages: [{ role: "user", content: "still there" }] });
    expect(after.choices[0].message.content).toBe("echo: still there");

    // The tokens are the caller's inference usage by the deployment's name; the replicas' GPU time the owner's jobs.
    const usage = await waitFor(
      async () => {
        const u = (await http(base, "GET", "/api/usage", { token: alice })).body;
        return u.inference?.byModel?.echo > 0 && u.gpu?.jobs >= 1 && u;
      },
      { timeoutMs: 15_000, message: "the deployment's tokens and GPU time in the usage" },
    );
    expect(usage.inference.byModel.echo).toBeGreaterThanOrEqual(8 + 8); // two answers of 8 tokens each, at least

    // Deleting stops the replica.
    expect((await http(base, "DELETE", `/api/deployments/${id}`, { token: alice })).status).toBe(200);
    await waitFor(async () => (await http(base, "GET", `/api/gpu/jobs/${replaced.id}`, { token: alice })).body.status === "cancelled", {
      timeoutMs: 15_000,
      message: "the replica stopped",
    });
    expect((await http(base, "GET", `/api/deployments/${id}`, { token: alice })).status).toBe(404);
  });

  test("deployments - more than targetInflight in flight starts a second replica, the next request goes to it; idle, both stop", async () => {
    const command = replicaCommand(PORT, { REPLICA_TAG: "b", CHUNK_DELAY_MS: "300" });
    const made = await create({ name: "busy", command, port: PORT, maxReplicas: 2, targetInflight: 1, idleTimeoutSeconds: 10 });
    const id = made.body.id as string;
    const ask = async () => {
      const stream = await client().chat.completions.create({ model: "busy", stream: true, messages: [{ role: "user", content: "model?" }] });
      const it = stream[Symbol.asyncIterator]();
      const first = await it.next(); // the answer is under way: its replica has it in flight
      // In an object: awaiting ask() must not wait for the whole answer.
      return {
        text: (async () => {
          let text = first.value?.choices[0]?.delta?.content ?? "";
          for (let next = await it.next(); !next.done; next = await it.next()) text += next.value.choices[0]?.delta?.content ?? "";
          return text;
        })(),
      };
    };
    const one = await ask(); // cold start of the first replica
    const two = await ask(); // two in flight on one replica, target 1: a second replica starts
    await waitFor(async () => (await http(base, "GET", `/api/deployments/${id}`, { token: alice })).body.replicas.ready === 2, {
      timeoutMs: 20_000,
      message: "a second replica ready",
    });
    const servers = new Set([await one.text, await two.text].map((t) => t.split("server: ")[1]));
    expect(servers.size).toBe(1);
    const three = await ask(); // the fewest in flight: with one running on the first, the second one
    const four = await ask();
    const both = new Set([await three.text, await four.text].map((t) => t.split("server: ")[1]));
    expect(both.size).toBe(2);
    // No request for idleTimeoutSeconds: down to minReplicas (0), the cards released.
    await waitFor(
      async () => {
        const d = (await http(base, "GET", `/api/deployments/${id}`, { token: alice })).body;
        const jobs = (await http(base, "GET", `/api/gpu/jobs?deploymentId=${id}`, { token: alice })).body.jobs;
        return d.status === "idle" && d.replicas.desired === 0 && jobs.every((j: { status: string }) => j.status === "cancelled");
      },
      { timeoutMs: 25_000, intervalMs: 500, message: "the replicas stopped once idle" },
    );
  });

  test("deployments - a replica that just died is passed over: requests its node can no longer deliver go to the other ready replica", async () => {
    const made = await create({ name: "twins", command: replicaCommand(PORT, { REPLICA_TAG: "twin" }), port: PORT, minReplicas: 2, maxReplicas: 2 });
    const id = made.body.id as string;
    await waitFor(async () => (await http(base, "GET", `/api/deployments/${id}`, { token: alice })).body.replicas.ready === 2, {
      timeoutMs: 30_000,
      message: "two replicas ready",
    });
    const ask = (content: string) => client().chat.completions.create({ model: "twins", messages: [{ role: "user", content }] });
    // Both are used (requests at once go to the one with fewer in flight), so each has a kept-alive connection.
    expect((await Promise.all([ask("a"), ask("b"), ask("c"), ask("d")])).map((r) => r.choices[0].message.content)).toEqual([
      "echo: a",
      "echo: b",
      "echo: c",
      "echo: d",
    ]);
    // One replica's server dies, as a crash does: before the platform hears of it, requests keep coming.
    const servers = replicaServerPids("twin");
    expect(servers).toHaveLength(2);
    process.kill(servers[0], "SIGKILL");
    const asked = ["e", "f", "g", "h", "i", "j"];
    const answers = await Promise.allSettled(asked.map((c) => ask(c)));
    expect(answers.map((a) => (a.status === "fulfilled" ? a.value.choices[0].message.content : String(a.reason)))).toEqual(asked.map((c) => `echo: ${c}`));
    expect((await http(base, "DELETE", `/api/deployments/${id}`, { token: alice })).status).toBe(200);
  });

  test("deployments - a server that never becomes ready: three replicas in a row, then failed with the last one's exit and output; 503 with Retry-After", async () => {
    const made = await create({ name: "broken", command: "echo boom-output; exit 3", port: PORT });
    const res = await http(base, "POST", "/v1/chat/completions", { token: alice, body: { model: "broken", messages: [{ role: "user", content: "hi" }] } });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(res.body.error.message).toContain("boom-output");
    const shown = (await http(base, "GET", `/api/deployments/${made.body.id}`, { token: alice })).body;
    expect(shown.status).toBe("failed");
    expect(shown.statusReason).toMatch(/^3 replicas in a row ended without becoming ready; the last: exit code 3.*boom-output/);
    const replicas = (await http(base, "GET", `/api/gpu/jobs?deploymentId=${made.body.id}`, { token: alice })).body.jobs;
    expect(replicas.map((j: { status: string }) => j.status)).toEqual(["failed", "failed", "failed"]);
  });

  test("deployments - the resource's rules: ranges, unknown fields, names, another account's 404", async () => {
    const command = replicaCommand(PORT);
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ name: "Upper", command, port: PORT }, "name"],
      [{ name: "ok", command, port: 80 }, "port"],
      [{ name: "ok", command, port: PORT, maxReplicas: 11 }, "maxReplicas"],
      [{ name: "ok", command, port: PORT, idleTimeoutSeconds: 5 }, "idleTimeoutSeconds"],
      [{ name: "ok", command, port: PORT, minReplicas: 3, maxReplicas: 2 }, "minReplicas"],
      [{ name: "ok", command, port: PORT, replicas: 2 }, "replicas"],
      [{ name: "ok", command, port: PORT, env: { NVIDIA_VISIBLE_DEVICES: "all" } }, "env"],
    ];
    for (const [body, field] of bad) {
      const res = await create(body);
      expect([field, res.status, res.body.error?.code]).toEqual([field, 400, "VALIDATION_FAILED"]);
      expect(JSON.stringify(res.body.error.details)).toContain(field);
    }
    expect((await http(base, "GET", "/api/deployments", { token: alice })).body.deployments.map((d: { name: string }) => d.name)).not.toContain("ok");

    // A replica's fields are the platform's: a client's job cannot claim to be one.
    for (const field of ["deploymentId", "servePort"]) {
      const job = await http(base, "POST", "/api/gpu/jobs", {
        token: alice,
        body: { command: "true", [field]: field === "servePort" ? 8000 : ANY_DEPLOYMENT_ID },
      });
      expect([field, job.status, job.body.error.details]).toEqual([field, 400, [expect.objectContaining({ field })]]);
    }

    const made = await create({ name: "mine", command, port: PORT, env: { SECRET: "s3cret" } });
    expect(made.status).toBe(201);
    expect(made.body.envNames).toEqual(["SECRET"]);
    expect(JSON.stringify(made.body)).not.toContain("s3cret");
    expect((await create({ name: "mine", command, port: PORT })).status).toBe(409);
    expect((await create({ name: "mine", command, port: PORT }, bob)).status).toBe(201); // names are per account

    const id = made.body.id as string;
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { maxReplicas: 2 }],
      ["DELETE", undefined],
    ] as const) {
      const res = await http(base, method, `/api/deployments/${id}`, { token: bob, body });
      expect([method, res.status, res.body.error?.code]).toEqual([method, 404, "NOT_FOUND"]);
    }
    const patched = await http(base, "PATCH", `/api/deployments/${id}`, { token: alice, body: { maxReplicas: 2, targetInflight: 8 } });
    expect(patched.body).toMatchObject({ maxReplicas: 2, targetInflight: 8, port: PORT });
    const refused = await http(base, "PATCH", `/api/deployments/${id}`, { token: alice, body: { port: 9000 } });
    expect([refused.status, refused.body.error.details]).toEqual([400, [expect.objectContaining({ field: "port" })]]);
    // Bob's own "mine" is his model, not Alice's deployment.
    const asBob = await client(bob)
      .chat.completions.create({ model: "nothing-here", messages: [{ role: "user", content: "x" }] })
      .catch((e: { status: number }) => e);
    expect((asBob as { status: number }).status).toBe(404);

    // A restricted token needs jobs:write to create, jobs:read to list.
    const token = (await http(base, "POST", "/api/auth/tokens", { token: alice, body: { name: "read", scopes: ["jobs:read"] } })).body.token as string;
    expect((await http(base, "GET", "/api/deployments", { token })).status).toBe(200);
    const denied = await create({ name: "other", command, port: PORT }, token);
    expect([denied.status, denied.body.error.details]).toEqual([403, { missingScope: "jobs:write" }]);
  });

  test("deployments - the caller's rate limits and monthly quota hold for its traffic: the replica's tokens count by the deployment's name", async () => {
    const admin = (await signUp("admin", ADMIN_EMAIL)).accessToken as string;
    const carol = await signUp("carol");
    const quotas = async (body: Record<string, unknown>) =>
      expect((await http(base, "PUT", `/api/admin/accounts/${carol.client.id}/quotas`, { token: admin, body })).status).toBe(200);
    // The platform's own route: its errors in the contract's shape (the /v1 routes answer OpenAI's).
    const ask = () => http(base, "POST", "/api/models/infer", { token: carol.accessToken, body: { model: "metered", prompt: "hi" } });
    const metered = (await create({ name: "metered", command: replicaCommand(PORT, { REPLICA_TAG: "m" }), port: PORT }, carol.accessToken)).body.id as string;

    // Requests per minute: the cold start counts as one; over the limit, 429 with the headers.
    await quotas({ requestsPerMinute: 2, tokens: 1e9 });
    const answered = [await ask(), await ask()];
    expect(answered.map((r) => [r.status, r.headers.get("x-ratelimit-limit-requests"), r.headers.get("x-ratelimit-remaining-requests")])).toEqual([
      [200, "2", "1"],
      [200, "2", "0"],
    ]);
    const refused = await ask();
    expect([refused.status, refused.body.error.code, refused.body.error.details.limit]).toEqual([429, "RATE_LIMITED", "requests"]);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    // Tokens per minute: the 8 tokens each answer of the replica reports fill the window (counted as
    // each answer finishes, so one or two more may start before the count reaches the limit).
    await quotas({ requestsPerMinute: null, tokensPerMinute: 24 });
    let served = 2;
    const tpm = await waitFor(
      async () => {
        const res = await ask();
        if (res.status === 200) served++;
        return res.status === 429 && res;
      },
      { timeoutMs: 5000, message: "the replica's tokens in the tokens-per-minute window" },
    );
    expect([tpm.body.error.details.limit, tpm.headers.get("x-ratelimit-remaining-tokens")]).toEqual(["tokens", "0"]);
    expect(served).toBeGreaterThanOrEqual(3);

    // The month's tokens: the caller's usage by the deployment's name; at the quota, 403.
    const used = await waitFor(
      async () => {
        const u = (await http(base, "GET", "/api/usage", { token: carol.accessToken })).body;
        return u.inference?.byModel?.metered === 8 * served && u.inference;
      },
      { timeoutMs: 10_000, message: "the tokens recorded" },
    );
    expect([used.tokens, used.requests]).toEqual([8 * served, served]);
    await quotas({ tokensPerMinute: null, tokens: 8 * served });
    const over = await ask();
    expect([over.status, over.body.error.code, over.body.error.details]).toEqual([
      403,
      "QUOTA_EXCEEDED",
      expect.objectContaining({ resource: "tokens", limit: 8 * served, used: 8 * served }),
    ]);
    expect((await http(base, "DELETE", `/api/deployments/${metered}`, { token: carol.accessToken })).status).toBe(200);
  });

  test("deployments - a fallback to a cold deployment holds the request while its replica starts, as a direct request does", async () => {
    const made = await create({ name: "cold-fallback", command: replicaCommand(PORT, { REPLICA_TAG: "f" }), port: PORT, idleTimeoutSeconds: 10 });
    expect(made.body.status).toBe("idle");
    const answer = await client().chat.completions.create({
      model: "no-such-model",
      models: ["cold-fallback"],
      messages: [{ role: "user", content: "via fallback" }],
    } as never);
    expect([answer.model, answer.choices[0].message.content]).toEqual(["cold-fallback", "echo: via fallback"]);
    expect((await http(base, "DELETE", `/api/deployments/${made.body.id}`, { token: alice })).status).toBe(200);
  });
});
