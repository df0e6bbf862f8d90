/**
 * The SDK (clients/sdk) against a platform with every service, in one process: a simulated card
 * running sandboxed processes, an Ollama stand-in, the tenant PostgreSQL. Also the drift check:
 * the committed generated types must come from the document the platform serves now.
 */
import { mkdtempSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { ApiError, CiPlatform, Job } from "../../clients/sdk/src";
import { committedHash, documentHash, SCHEMA_FILE } from "../../clients/sdk/scripts/openapi-source";
import { OllamaStandin } from "../support/provider-standins";
import { http, sandboxedGpuEnv, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected an ApiError");
    },
    (err: ApiError) => ({ status: err.status, code: err.code, isApiError: err instanceof ApiError }),
  );

describe("clients sdk - the typed SDK against the live routes", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let sdk: CiPlatform;
  let email: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "sdk-"));

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    ollama = await new OllamaStandin().start();
    email = `${uniqueName("sdk")}@example.com`;
    platform = await startTestPlatform({
      services: Object.keys(SERVICE_REGISTRY),
      env: sandboxedGpuEnv(work, { OLLAMA_URL: ollama.url, ADMIN_EMAILS: email }),
    });
    // Every service the calls below reach: the gateway learns each one's routes as it appears.
    for (const route of [
      "/api/auth/me",
      "/api/gpu/status",
      "/api/databases",
      "/api/models",
      "/api/usage",
      "/api/admin/nodes",
      "/api/deployments",
      "/v1/batches",
    ])
      await waitForRoute(platform.baseUrl, "GET", route);
    const anonymous = new CiPlatform({ baseUrl: platform.baseUrl });
    const { accessToken } = await anonymous.register({ email, name: "SDK user", password: "correct horse battery" });
    sdk = anonymous.withToken(accessToken);
    await waitFor(async () => (await sdk.clusterStatus()).cluster.totalGpus === 1, { message: "the simulated card" });
  });

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("clients sdk - the committed generated types come from the live /api/openapi.json (regenerate: npm run sdk:generate)", async () => {
    const doc = (await http(platform.baseUrl, "GET", "/api/openapi.json")).body;
    expect(committedHash()).toBe(documentHash(doc));
    // A hand edit of the generated file shows too: its paths are exactly the document's.
    const generated = [...readFileSync(SCHEMA_FILE, "utf8").matchAll(/^ {2}"(\/(?:api|v1)[^"]*)": \{$/gm)].map((m) => m[1]);
    expect(generated.sort()).toEqual(Object.keys(doc.paths).sort());
  });

  test("clients sdk - accounts: login, me, an API key that works, and errors as ApiError with the contract's code", async () => {
    const login = await new CiPlatform({ baseUrl: platform.baseUrl }).login({ email, password: "correct horse battery" });
    expect(login.client.email).toBe(email);
    const { apiKey } = await sdk.createApiKey();
    expect(apiKey).toMatch(/^ci_/);
    const byKey = sdk.withToken(apiKey);
    expect((await byKey.me()).email).toBe(email);
    expect(await rejection(byKey.createApiKey())).toEqual({ status: 403, code: expect.any(String), isApiError: true });
    expect(await rejection(sdk.withToken("ci_" + "0".repeat(32)).me())).toEqual({ status: 401, code: "UNAUTHORIZED", isApiError: true });
    expect(await rejection(new CiPlatform({ baseUrl: platform.baseUrl }).login({ email, password: "wrong password!" }))).toMatchObject({ status: 401 });
    expect((await sdk.createWebhookSecret()).webhookSecret).toMatch(/^whsec_/);
  });

  test("clients sdk - restricted tokens: created (JWT), working within its scopes, listed without the secret, deleted; a job's platformAccess echoed", async () => {
    const created = await sdk.createToken({ name: "sdk", scopes: ["usage:read"], expiresInSeconds: 600, maxCredits: 1 });
    expect(created.token).toMatch(/^cit_[a-z0-9]{32}$/);
    const asToken = sdk.withToken(created.token);
    expect((await asToken.usage()).gpu).toBeDefined();
    expect(await rejection(asToken.listJobs())).toEqual({ status: 403, code: "FORBIDDEN", isApiError: true });
    const { tokens } = await sdk.listTokens();
    expect(tokens.find((t) => t.id === created.id)).toMatchObject({ name: "sdk", scopes: ["usage:read"], maxCredits: 1, creditsUsed: 0, jobId: null });
    expect(JSON.stringify(tokens)).not.toContain(created.token);
    expect((await sdk.deleteToken(created.id)).message).toEqual(expect.any(String));
    await waitFor(async () => (await rejection(asToken.me())).status === 401, { message: "the deleted token refused" });
    const job = await sdk.submitJob({ command: "true", platformAccess: { scopes: ["inference"], models: ["llama3.2:1b"] } });
    expect((await sdk.getJob(job.id)).platformAccess).toEqual({ scopes: ["inference"], models: ["llama3.2:1b"] });
  });

  test("clients sdk - a job's output follows as it is printed and waitForJob resolves with its exit code", async () => {
    const { id } = await sdk.submitJob({ command: "for i in 1 2 3; do echo line $i; sleep 0.3; done; exit 4", env: { A: "1" } });
    let followed = "";
    let runningWhileFollowing = false;
    for await (const chunk of sdk.followLogs(id)) {
      if (!followed) runningWhileFollowing = (await sdk.getJob(id)).status === "running";
      followed += chunk;
    }
    expect(runningWhileFollowing).toBe(true);
    expect(followed).toBe("line 1\nline 2\nline 3\n");
    const seen: string[] = [];
    const job: Job = await sdk.waitForJob(id, { onUpdate: (j) => seen.push(j.status) });
    expect(job).toMatchObject({ id, status: "failed", result: { exitCode: 4 }, envNames: ["A"] });
    expect(seen.at(-1)).toBe("failed");
    expect(await sdk.jobLogs(id)).toBe(followed);
    expect((await sdk.listJobs()).jobs.map((j) => j.id)).toContain(id);
    expect(await rejection(sdk.jobArtifacts(id))).toMatchObject({ status: 404, code: "NOT_FOUND" });
  });

  test("clients sdk - job events end after the terminal status; cancel; bad input is a 400 that submits nothing", async () => {
    const { id } = await sdk.submitJob({ command: "sleep 30" });
    await waitFor(async () => (await sdk.getJob(id)).status === "running", { message: "running" });
    const statuses: string[] = [];
    const events = (async () => {
      for await (const job of sdk.jobEvents(id)) statuses.push(job.status);
    })();
    await waitFor(() => statuses.includes("running"), { message: "the first event" });
    await sdk.cancelJob(id);
    await events;
    expect(statuses).toEqual(["running", "cancelled"]);
    const before = (await sdk.listJobs()).jobs.length;
    expect(await rejection(sdk.submitJob({ command: "" }))).toEqual({ status: 400, code: "VALIDATION_FAILED", isApiError: true });
    expect(await rejection(sdk.submitJob({ command: "x", gpuCount: 0 }))).toMatchObject({ status: 400, code: "VALIDATION_FAILED" });
    expect(await rejection(sdk.getJob("../../etc/passwd"))).toMatchObject({ status: 404 });
    expect((await sdk.listJobs()).jobs.length).toBe(before);
  });

  test("clients sdk - an array: submitted in one call, counted, a dependant waiting for it, cancelled whole", async () => {
    const created = await sdk.submitArray({ command: "sleep 30", arrayCount: 3, arrayParallelism: 1 });
    expect(created.jobIds).toHaveLength(3);
    const after = await sdk.submitJob({ command: "true", dependsOn: [{ arrayId: created.arrayId, condition: "succeeded" }] });
    expect((await sdk.getJob(after.id)).statusReason).toBe(`waiting for every job of array ${created.arrayId} to succeed`);
    expect((await sdk.getArray(created.arrayId)).total).toBe(3);
    expect((await sdk.cancelArray(created.arrayId)).counts).toEqual({ cancelled: 3 });
    await waitFor(async () => (await sdk.getJob(after.id)).status === "cancelled", { message: "the dependant cancelled" });
  });

  test("clients sdk - models, a plain inference and a streamed one whose deltas make the reply", async () => {
    expect((await sdk.listModels()).models.map((m) => m.name)).toContain("llama3.2:1b");
    expect(await sdk.modelsHealth()).toEqual({ ollama: true });
    expect((await sdk.infer({ model: "llama3.2:1b", prompt: "hi" })).response).toBe("Hello, world!");
    const chunks = [];
    for await (const chunk of sdk.inferStream({ model: "llama3.2:1b", prompt: "hi" })) chunks.push(chunk);
    expect(chunks.map((c) => c.delta ?? "").join("")).toBe("Hello, world!");
    expect(chunks.at(-1)).toMatchObject({ done: true, response: "Hello, world!" });
    expect(await rejection(sdk.inferStream({ model: "no-such-model", prompt: "hi" }).next())).toMatchObject({ status: 404 });
  });

  test("clients sdk - databases: create, list, get, rotate, snapshot, delete", async () => {
    const db = await sdk.createDatabase({ maxStorageMb: 50 });
    expect(db.connectionString).toContain(db.password);
    expect((await sdk.listDatabases()).databases.map((d) => d.id)).toContain(db.id);
    expect((await sdk.getDatabase(db.id)).maxStorageMb).toBe(50);
    const rotated = await sdk.rotatePassword(db.id);
    expect(rotated.password).not.toBe(db.password);
    const snapshot = await sdk.createSnapshot(db.id);
    expect((await sdk.listSnapshots()).snapshots.map((s) => s.id)).toContain(snapshot.id);
    // A snapshot is taken in the background; it can be deleted once it is ready.
    await waitFor(async () => (await sdk.getSnapshot(snapshot.id)).status === "ready", { message: "the snapshot ready", timeoutMs: 30_000 });
    await sdk.deleteSnapshot(snapshot.id);
    await sdk.deleteDatabase(db.id);
    expect(await rejection(sdk.getDatabase(db.id))).toMatchObject({ status: 404, code: "NOT_FOUND" });
    expect(await rejection(sdk.createDatabase({ maxStorageMb: -1 }))).toMatchObject({ status: 400, code: "VALIDATION_FAILED" });
  });

  test("clients sdk - usage, quotas, webhook deliveries and an admin route through the generic typed call", async () => {
    const usage = await sdk.usage();
    expect(usage.gpu.jobs).toBeGreaterThanOrEqual(1);
    expect(await sdk.quotas()).toBeDefined();
    expect(Array.isArray((await sdk.webhookDeliveries()).deliveries)).toBe(true);
    const nodes = await sdk.api("get", "/api/admin/nodes", {});
    expect(nodes.nodes).toHaveLength(1);
    expect(await rejection(sdk.usage({ from: "not a date" }))).toMatchObject({ status: 400 });
  });
});
