/**
 * Jobs that use the platform with the clients people use (issue 28: "psql, libpq, `pg` and the
 * `openai` client inside a job work unchanged with the URLs given"): a Docker job without a network
 * (the gpu-node's Docker executor, its relay) runs a Node.js script with the official `openai` npm
 * client on CI_PLATFORM_URL/CI_PLATFORM_TOKEN and `pg` on CI_DATABASE_URL_0, and nothing else.
 * The image is the servers' test image plus those two packages, built here without a registry.
 * Real: gateway, auth, dbaas (tenant cluster), inference (an Ollama stand-in as its provider),
 * gpu-scheduler, gpu-node, Docker.
 */
import { execFileSync } from "child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { freePort, http, relayEnv, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";
import { OllamaStandin } from "../support/provider-standins";
import { psql, stopDbaasPlatform, tenantEnv } from "../integration/dbaas.helpers";

const BASE_IMAGE = process.env.TEST_PSQL_IMAGE || "ci-platform-test/servers:bookworm";
const IMAGE = "ci-platform-test/job-clients:latest";
const MODEL = "llama3.2:1b";

/** The packages `names` need, from this checkout's node_modules (dependencies, transitively). */
function closure(names: string[], root = path.resolve(__dirname, "../../node_modules")): string[] {
  const seen = new Set<string>();
  const visit = (name: string) => {
    const manifest = path.join(root, name, "package.json");
    if (seen.has(name) || !existsSync(manifest)) return;
    seen.add(name);
    const { dependencies = {}, optionalDependencies = {} } = JSON.parse(readFileSync(manifest, "utf8"));
    Object.keys({ ...dependencies, ...optionalDependencies }).forEach(visit);
  };
  names.forEach(visit);
  return [...seen].map((name) => path.join(root, name));
}

/** What the job runs: the model through the platform, its answer into its database, then a model outside its list. */
const JOB_SCRIPT = `
const OpenAI = require("openai");
const { Client } = require("pg");
(async () => {
  const openai = new OpenAI({ baseURL: process.env.CI_PLATFORM_URL + "/v1", apiKey: process.env.CI_PLATFORM_TOKEN });
  const answer = await openai.chat.completions.create({ model: "${MODEL}", messages: [{ role: "user", content: "score this" }] });
  const content = answer.choices[0].message.content;
  const db = new Client({ connectionString: process.env.CI_DATABASE_URL_0 });
  await db.connect();
  await db.query("CREATE TABLE scores (answer text)");
  await db.query("INSERT INTO scores VALUES ($1)", [content]);
  const { rows } = await db.query("SELECT current_user AS who FROM scores");
  await db.end();
  let outside = "allowed";
  try {
    await openai.chat.completions.create({ model: "qwen2.5:0.5b", messages: [{ role: "user", content: "hi" }] });
  } catch (err) {
    outside = err instanceof OpenAI.PermissionDeniedError ? "PermissionDeniedError " + err.status : String(err);
  }
  console.log(JSON.stringify({ content, model: answer.model, who: rows[0].who, outside }));
})().catch((err) => { console.error(String(err)); process.exit(1); });
`;

describe("gpu platform access - the openai and pg clients inside a Docker job", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let base: string;
  let alice: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-platform-clients-"));

  beforeAll(async () => {
    // The job's image: the test servers' image (Node.js, psql) with openai, pg and the script (no registry).
    const context = path.join(work, "image");
    for (const dir of closure(["openai", "pg"]))
      cpSync(dir, path.join(context, "node_modules", path.basename(dir)), {
        recursive: true,
        filter: (src) => !/\/src$|\.d\.[cm]?ts$|\.map$/.test(src), // what runs, not what types or maps it
      });
    writeFileSync(path.join(context, "job.js"), JOB_SCRIPT);
    writeFileSync(path.join(context, "Dockerfile"), `FROM ${BASE_IMAGE}\nCOPY node_modules /app/node_modules\nCOPY job.js /app/job.js\n`);
    execFileSync("docker", ["build", "-q", "--network", "none", "-t", IMAGE, context], { stdio: "pipe" });

    ollama = await new OllamaStandin().start();
    const port = await freePort();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "dbaas", "gpu-scheduler", "gpu-node", "inference"],
      env: tenantEnv({
        PORT: String(port),
        OLLAMA_URL: ollama.url,
        ...relayEnv(`http://127.0.0.1:${port}`),
        GPU_EXECUTOR: "docker",
        GPU_DEFAULT_IMAGE: IMAGE,
        GPU_ALLOWED_REGISTRIES: "docker.io", // the local image reads as docker.io
        GPU_SIMULATE: "Clients Test GPU:1024",
        GPU_JOB_MEMORY_MB: "512",
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      }),
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/models/health");
    alice = (
      await http(base, "POST", "/api/auth/register", { body: { email: `clients-${Date.now()}@example.com`, name: "alice", password: "correct horse battery" } })
    ).body.accessToken;
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body?.cluster?.totalGpus === 1, { message: "the card announced" });
  }, 120_000);

  afterAll(async () => {
    await stopDbaasPlatform(platform);
    await ollama?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu platform access - a Docker job calls a model with the openai client and writes the answer with pg; a model outside its list is PermissionDeniedError", async () => {
    const db = (await http(base, "POST", "/api/databases", { token: alice, body: {} })).body;
    const created = await http(base, "POST", "/api/gpu/jobs", {
      token: alice,
      body: { command: "node /app/job.js", platformAccess: { scopes: ["inference"], models: [MODEL], databases: [db.id] } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const ended = await waitFor(
      async () => {
        const job = (await http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice })).body;
        return ["completed", "failed", "cancelled"].includes(job.status) ? job : false;
      },
      { timeoutMs: 60_000, intervalMs: 100, message: "the job to end" },
    );
    const logs = (await http(base, "GET", `/api/gpu/jobs/${id}/logs`, { token: alice })).text.trim();
    expect([ended.status, ended.errorMessage ?? null]).toEqual(["completed", null]);
    const report = JSON.parse(logs.split("\n").pop()!);
    // The stand-in's answer, through the platform's inference, and the job's role acting as the database's owner.
    expect(report).toEqual({ content: expect.any(String), model: MODEL, who: db.username, outside: "PermissionDeniedError 403" });
    expect(ollama.requests.filter((r) => r.path === "/api/chat")).toHaveLength(1); // the refused model never reached the provider
    expect(psql(db.connectionString, "SELECT answer FROM scores").stdout.trim()).toBe(report.content);
  }, 90_000);
});
