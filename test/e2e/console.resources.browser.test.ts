/**
 * The web console's second half in Debian's Chromium (playwright-core): `/` leads to it, a reload
 * keeps the session (a refused token ends it, in words), the guiding empty states (no model, no job)
 * and no empty reply bubble when the provider fails, a job's page (exit code, error, elapsed then
 * duration, the output once, artifacts downloaded, its array and dependencies), the Deployments and
 * Batches pages showing what the API returns, a simulated card labelled and its history drawn from
 * the server's (GET /api/gpu/status/history) at page load. Screenshots at desktop and
 * phone widths go to test-results/console/.
 */
import fs from "fs";
import os from "os";
import path from "path";
import type { Browser, Page } from "playwright-core";
import { replicaCommand } from "../fixtures/deployments/replica";
import { launchChromium, watchProblems } from "../support/chromium";
import { OllamaStandin } from "../support/provider-standins";
import { http, ROOT, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const SHOTS = path.join(ROOT, "test-results", "console");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 860 };

describe("console - resources, sessions and empty states in Chromium", () => {
  let platform: TestPlatform;
  let browser: Browser;
  let page: Page;
  let ollama: OllamaStandin;
  let token: string;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "console-res-"));
  const problems: string[] = [];
  const email = `console-res-${Date.now()}@example.com`;
  const password = "correct horse battery";
  const fact = (name: string) => page.locator(`dt:text-is("${name}") + dd`);
  /** The page at desktop width, then at a phone's (nothing wider than the screen), back to desktop. */
  const shots = async (name: string) => {
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    await page.setViewportSize(PHONE);
    expect([name, await page.evaluate(() => document.documentElement.scrollWidth)]).toEqual([name, PHONE.width]);
    await page.screenshot({ path: path.join(SHOTS, `${name}-phone.png`), fullPage: true });
    await page.setViewportSize(DESKTOP);
  };
  const open = async (hash: string) => {
    await page.goto(`${platform.baseUrl}/console#${hash}`);
    await page.reload();
  };

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "inference", "metrics"],
      // The cluster history in 1 s buckets over 10 minutes (more than this file runs, so a live sample always adds a column): hundreds of columns, a sample per heartbeat.
      env: sandboxedGpuEnv(work, {
        OLLAMA_URL: ollama.url,
        MODELS_CACHE_S: "1",
        BATCH_POLL_MS: "50",
        DEPLOYMENTS_TICK_MS: "200",
        METRICS_HISTORY_BUCKET_S: "1",
        METRICS_HISTORY_WINDOW_S: "600",
      }),
    });
    for (const [method, route] of [
      ["POST", "/api/auth/register"],
      ["GET", "/api/gpu/status"],
      ["GET", "/api/models"],
      ["GET", "/api/deployments"],
      ["GET", "/v1/batches"],
    ])
      await waitForRoute(platform.baseUrl, method, route, 30_000);
    token = (await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, password, name: "Res" } })).body.accessToken;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: DESKTOP });
    watchProblems(page, problems);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await platform?.stop();
    await ollama?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("console - `/` redirects to the console; a reload keeps the session (this tab's sessionStorage), a refused token ends it in words, an expired one is never sent", async () => {
    const res = await fetch(`${platform.baseUrl}/`, { redirect: "manual" });
    expect([res.status, res.headers.get("location")]).toEqual([302, "./console"]);
    await page.goto(`${platform.baseUrl}/`);
    expect(new URL(page.url()).pathname).toBe("/console");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Jobs", exact: true }).waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "Jobs", exact: true }).waitFor();
    expect(await page.getByLabel("Email").count()).toBe(0);
    expect(await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie])).toEqual([0, 1, ""]);
    // No job yet: a first command to copy.
    await page.getByText("No jobs yet").waitFor();
    expect(await page.locator(".copy-line code").textContent()).toBe("ci-platform jobs run --wait --follow -- nvidia-smi");
    await shots("12-jobs-empty");
    // A token the API refuses (revoked, expired): the session ends, the login says so.
    const saved = await page.evaluate(() => sessionStorage.getItem("ci-platform.session")!);
    await page.evaluate((s) => sessionStorage.setItem("ci-platform.session", JSON.stringify({ ...JSON.parse(s), token: "not.a-token.at-all" })), saved);
    await page.reload();
    await page.getByText("Your session ended: sign in again.").waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    // A token past its `exp` is forgotten at load, never sent.
    const expired = `x.${Buffer.from(JSON.stringify({ exp: Math.floor(Date.now() / 1000) - 1 })).toString("base64url")}.y`;
    await page.evaluate((s) => sessionStorage.setItem("ci-platform.session", s), JSON.stringify({ ...JSON.parse(saved), token: expired }));
    const sent: string[] = [];
    page.on("request", (req) => req.headers().authorization?.includes(expired) && sent.push(req.url()));
    await page.reload();
    await page.getByLabel("Email").waitFor();
    expect([await page.evaluate(() => sessionStorage.length), sent]).toEqual([0, []]);
    await page.evaluate((s) => sessionStorage.setItem("ci-platform.session", s), saved);
    await page.reload();
    await page.getByRole("heading", { name: "Jobs", exact: true }).waitFor();
  });

  it("console - models: no provider answering says what to run and sends nothing; a failing provider leaves no empty bubble", async () => {
    const models = ollama.models;
    ollama.models = [];
    await waitFor(async () => (await http(platform.baseUrl, "GET", "/api/models", { token })).body.models.length === 0, { message: "no model listed" });
    await open("models");
    await page.getByRole("heading", { name: "No model provider answers" }).waitFor();
    expect(await page.locator(".copy-line code").allTextContents()).toEqual(
      expect.arrayContaining(["ollama pull llama3.2:1b", expect.stringMatching(/^OPENAI_PROVIDERS=/)]),
    );
    expect(await page.getByRole("button", { name: "Send" }).isDisabled()).toBe(true);
    await shots("13-models-no-provider");
    ollama.models = models;
    await waitFor(async () => (await http(platform.baseUrl, "GET", "/api/models", { token })).body.models.length > 0, { message: "models listed" });
    await open("models");
    await page.locator("#chat-model option", { hasText: "llama3.2:1b" }).waitFor({ state: "attached" });
    expect(await page.getByRole("heading", { name: "No model provider answers" }).count()).toBe(0);
    ollama.set({ fail: { status: 500, message: "model runner crashed" } });
    await page.getByLabel("Prompt", { exact: true }).fill("Hello?");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("alert").waitFor();
    await waitFor(async () => !(await page.getByRole("button", { name: "Send" }).isDisabled()), { message: "the send settled" });
    expect(await page.locator(".msg.assistant").count()).toBe(0);
    ollama.set({});
  });

  it("console - a job's page: elapsed while it runs, then exit code, error, duration, the output once, artifacts downloaded", async () => {
    // "end-42" is printed, never typed: the page holds it once only if the output is shown once.
    const command = "echo marker-start; sleep 2; mkdir -p /out && echo kept > /out/result.txt; echo end-$((6*7)); exit 3";
    const job = (await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command } })).body;
    await open(`jobs/${job.id}`);
    await fact("Elapsed").waitFor({ timeout: 20_000 });
    const first = await fact("Elapsed").textContent();
    await waitFor(async () => (await fact("Elapsed").count()) === 0 || (await fact("Elapsed").textContent()) !== first, { message: "elapsed counting" });
    await waitFor(async () => (await page.locator("h1 .badge").textContent()) === "failed", { timeoutMs: 30_000, message: "failed" });
    expect(await fact("Exit code").textContent()).toBe("3");
    expect(await fact("Error").textContent()).toBe("Command exited with code 3");
    expect(await fact("Duration").textContent()).toMatch(/^\d+\.\d s$/);
    await waitFor(async () => (await page.getByLabel("Job output").textContent()) === "marker-start\nend-42\n", { message: "the output" });
    // The output once: not repeated by a raw result.
    expect((await page.locator("main").textContent())!.split("end-42").length - 1).toBe(1);
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download artifacts" }).click()]);
    expect(download.suggestedFilename()).toBe(`job-${job.id.slice(0, 8)}-artifacts.tar`);
    const tar = fs.readFileSync((await download.path())!).toString("latin1");
    expect(tar).toContain("out/result.txt");
    expect(tar).toContain("kept\n");
    await shots("14-job-failed");
    // An array's job that waits on this one: its array, index and dependency linked.
    const array = (
      await http(platform.baseUrl, "POST", "/api/gpu/jobs", {
        token,
        body: { command: "true", arrayCount: 2, dependsOn: [{ jobId: job.id, condition: "failed" }] },
      })
    ).body;
    expect(array.jobIds).toHaveLength(2);
    await open(`jobs/${array.jobIds[1]}`);
    await fact("Array").waitFor();
    expect(await fact("Array").textContent()).toBe(`${array.arrayId.slice(0, 8)} · index 1`);
    expect(await fact("Depends on").textContent()).toBe(`${job.id.slice(0, 8)} (failed)`);
    expect(await fact("Depends on").getByRole("link").getAttribute("href")).toBe(`#jobs/${job.id}`);
  }, 60_000);

  it("console - deployments: the API's list with status and replicas, a name taken refused in words, created and deleted from the page", async () => {
    const body = { name: "api-made", command: "sleep 600", port: 8000, minReplicas: 0, maxReplicas: 2 };
    expect((await http(platform.baseUrl, "POST", "/api/deployments", { token, body })).status).toBe(201);
    await open("deployments");
    const row = page.locator("tbody tr", { hasText: "api-made" });
    await row.waitFor();
    expect(await row.locator("td").allTextContents()).toEqual(["api-made", "idle", "0 / 0 / 0", "0–2", "any · port 8000", "—", expect.any(String), "Delete"]);
    await page.getByLabel("Name").fill("api-made");
    await page.getByLabel("Command", { exact: true }).fill("sleep 600");
    await page.getByRole("button", { name: "Create deployment" }).click();
    expect(await page.getByRole("alert").textContent()).toMatch(/api-made/);
    await page.getByLabel("Name").fill("page-made");
    await page.getByRole("button", { name: "Create deployment" }).click();
    await page.locator("tbody tr", { hasText: "page-made" }).waitFor();
    const listed = (await http(platform.baseUrl, "GET", "/api/deployments", { token })).body.deployments;
    expect(listed.map((d: { name: string }) => d.name).sort()).toEqual(["api-made", "page-made"]);
    await shots("15-deployments");
    await page.getByRole("button", { name: "Delete deployment page-made" }).click();
    await waitFor(async () => (await page.locator("tbody tr", { hasText: "page-made" }).count()) === 0, { message: "the row gone" });
    expect((await http(platform.baseUrl, "GET", "/api/deployments", { token })).body.deployments.map((d: { name: string }) => d.name)).toEqual(["api-made"]);
  });

  it("console - a deployment's page: status and why, its replicas, its recent requests, and a chat box answered by its replica after a cold start", async () => {
    const body = { name: "page-chat", command: replicaCommand(8000, { REPLICA_TAG: "ui" }), port: 8000, idleTimeoutSeconds: 60 };
    const made = (await http(platform.baseUrl, "POST", "/api/deployments", { token, body })).body;
    await open("deployments");
    await page.getByRole("link", { name: "page-chat" }).click();
    expect(new URL(page.url()).hash).toBe(`#deployments/${made.id}`);
    await page.getByRole("heading", { name: "Deployment page-chat idle" }).waitFor();
    expect(await fact("Replicas").textContent()).toBe("0 ready · 0 starting · 0 desired");
    expect(await page.getByRole("table", { name: "Replicas" }).locator("tbody").textContent()).toBe("No replica: a request starts one.");
    expect(await page.getByRole("table", { name: "Recent requests" }).locator("tbody").textContent()).toBe("No request yet: ask it something below.");

    // The chat box: the first message starts a replica and waits for it; the replica's answer is shown.
    await page.getByLabel("Message").fill("hello page");
    await page.getByRole("button", { name: "Send" }).click();
    await page.locator(".msg.assistant", { hasText: "echo: hello page" }).waitFor({ timeout: 30_000 });
    expect(await page.locator(".chat small").textContent()).toBe("page-chat · 8 tokens");
    // Then the page shows it ready, its running replica (linked to its job) and the request.
    await page.getByRole("heading", { name: "Deployment page-chat ready" }).waitFor();
    const [replica] = (await http(platform.baseUrl, "GET", `/api/gpu/jobs?deploymentId=${made.id}`, { token })).body.jobs;
    const replicaRow = page.locator(`tr[data-id="${replica.id}"]`);
    expect(await replicaRow.locator(".badge").textContent()).toBe("running");
    expect(await replicaRow.getByRole("link").getAttribute("href")).toBe(`#jobs/${replica.id}`);
    const requestRow = page.getByRole("table", { name: "Recent requests" }).locator("tbody tr").first();
    await requestRow.locator("td", { hasText: "3 + 5" }).waitFor();
    expect((await requestRow.locator("td").allTextContents()).slice(1)).toEqual(["ok", "3 + 5", expect.any(String), "—"]);
    expect((await http(platform.baseUrl, "GET", `/api/deployments/${made.id}/requests`, { token })).body.requests).toEqual([
      expect.objectContaining({ outcome: "ok", promptTokens: 3, completionTokens: 5, stream: false }),
    ]);
    await shots("18-deployment");
    // Another account's deployment: 404, as everywhere.
    const other = (await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email: `other-${Date.now()}@example.com`, password, name: "O" } })).body
      .accessToken;
    expect((await http(platform.baseUrl, "GET", `/api/deployments/${made.id}/requests`, { token: other })).status).toBe(404);
    expect((await http(platform.baseUrl, "DELETE", `/api/deployments/${made.id}`, { token })).status).toBe(200);
  }, 60_000);

  it("console - batches: the API's batch with its status and counts, its output file downloaded", async () => {
    const lines = ["one", "two"].map((id) =>
      JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "llama3.2:1b", messages: [{ role: "user", content: id }] } }),
    );
    const form = new FormData();
    form.append("purpose", "batch");
    form.append("file", new Blob([lines.join("\n") + "\n"]), "requests.jsonl");
    const file = await (await fetch(`${platform.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form })).json();
    const batchBody = { input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" };
    const batch = (await http(platform.baseUrl, "POST", "/v1/batches", { token, body: batchBody })).body;
    const done = await waitFor(
      async () => {
        const b = (await http(platform.baseUrl, "GET", `/v1/batches/${batch.id}`, { token })).body;
        return b.status === "completed" ? b : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, message: "the batch completed" },
    );
    await open("batches");
    const row = page.locator(`tr[data-id="${batch.id}"]`);
    await row.locator(".badge", { hasText: "completed" }).waitFor();
    expect(await row.locator("td").nth(3).textContent()).toBe("2 ✓ · 0 ✗ / 2");
    expect(await row.getByRole("button", { name: `Download error file` }).count()).toBe(done.error_file_id ? 1 : 0);
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      row.getByRole("button", { name: `Download output file ${done.output_file_id}` }).click(),
    ]);
    const output = fs
      .readFileSync((await download.path())!, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).custom_id);
    expect(output.sort()).toEqual(["one", "two"]);
    await shots("16-batches");
  });

  it("console - cluster: a simulated card says so; its utilization and memory over the server's history, drawn at page load, then live", async () => {
    // A job before the page is opened: the card's busy seconds are in the server's history only.
    const opened = Date.now();
    const job = (await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command: "sleep 2" } })).body;
    await waitFor(async () => (await http(platform.baseUrl, "GET", `/api/gpu/jobs/${job.id}`, { token })).body.status === "completed", {
      timeoutMs: 30_000,
      message: "the job done",
    });
    await waitFor(
      async () =>
        (await http(platform.baseUrl, "GET", "/api/gpu/status/history", { token })).body.gpus[0]?.samples.some(
          (s: { utilization: number }) => s.utilization > 0,
        ),
      {
        message: "a busy sample in the server's history",
      },
    );
    await open("cluster");
    const card = page.locator("article.gpu");
    await card.first().waitFor();
    expect(await card.locator(".badge.simulated").textContent()).toBe("simulated");
    // At once, no refresh waited for: a column per sample the server had (the last bucket may take the first live one,
    // or the live one add a column), the busy ones from before the page was opened included.
    const util = card.getByRole("img", { name: /^Utilization over the last/ });
    const drawn = (await util.locator(".col").evaluateAll((cols) => cols.map((c) => Number(c.getAttribute("data-value"))))).slice(0, -2);
    const served = (await http(platform.baseUrl, "GET", "/api/gpu/status/history", { token })).body.gpus[0].samples as Array<{
      at: string;
      utilization: number;
    }>;
    expect(drawn.length).toBeGreaterThan(5);
    expect(drawn).toEqual(served.slice(0, drawn.length).map((s) => Math.round(s.utilization)));
    expect(Math.max(...drawn)).toBeGreaterThan(0);
    expect(Date.parse(served[0].at)).toBeLessThan(opened);
    expect(await card.locator("figcaption").textContent()).toBe("Every 1 s over the last 10 min, kept by the server; live while the console is open");
    // Then live: each refresh (every 3 s) adds its bucket's column.
    const memory = card.getByRole("img", { name: /^Memory over the last/ });
    const before = await memory.locator(".col").count();
    await waitFor(async () => (await memory.locator(".col").count()) > before, { timeoutMs: 10_000, message: "a live sample" });
    expect(await memory.getAttribute("aria-label")).toMatch(/^Memory over the last \d+ samples: now \d+ %, at most \d+ %$/);
    await shots("17-cluster-history");
  }, 60_000);

  it("console - nothing failed in the page but the API's refusals and the provider failure caused on purpose", () => {
    expect(problems.filter((p) => !/status of (4\d\d|502)/.test(p))).toEqual([]);
  });
});
