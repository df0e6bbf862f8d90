/**
 * The web console (/console) end to end in Debian's Chromium (playwright-core): register and log in,
 * submit a job and watch its output arrive, the cluster's gauges (without a metrics service: the page's own history), a streamed chat reply, a database
 * created (password shown once) and destroyed behind its typed confirmation; errors in words; nothing
 * loaded from elsewhere, no CSP violation. Screenshots of each page go to test-results/console/.
 */
import fs from "fs";
import os from "os";
import path from "path";
import type { Browser, Page } from "playwright-core";
import { launchChromium, watchProblems } from "../support/chromium";
import { OllamaStandin } from "../support/provider-standins";
import { http, ROOT, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const SHOTS = path.join(ROOT, "test-results", "console");

describe("console - the web console in Chromium", () => {
  let platform: TestPlatform;
  let browser: Browser;
  let page: Page;
  let ollama: OllamaStandin;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "console-"));
  const requested: string[] = [];
  const problems: string[] = [];
  /** The cluster history's 503s: no metrics service here, on purpose (the page's live-only fallback). */
  let historyRefusals = 0;
  const email = `console-${Date.now()}@example.com`;
  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "inference", "dbaas", "usage"],
      env: sandboxedGpuEnv(work, { OLLAMA_URL: ollama.url, GPU_SIMULATE: "NVIDIA GeForce RTX 3060:12288" }),
    });
    for (const [method, route] of [
      ["POST", "/api/auth/register"],
      ["GET", "/api/gpu/status"],
      ["GET", "/api/models"],
      ["GET", "/api/databases"],
      ["GET", "/api/usage"],
    ])
      await waitForRoute(platform.baseUrl, method, route, 30_000);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.on("request", (req) => requested.push(req.url()));
    page.on("response", (res) => res.status() === 503 && new URL(res.url()).pathname === "/api/gpu/status/history" && historyRefusals++);
    watchProblems(page, problems);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await platform?.stop();
    await ollama?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("console - static files: this origin only by CSP, plain names only", async () => {
    const res = await http(platform.baseUrl, "GET", "/console");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
    expect((await http(platform.baseUrl, "GET", "/console/app.js")).headers.get("content-type")).toMatch(/^text\/javascript/);
    for (const bad of ["/console/nope.js", "/console/..%2Fpackage.json", "/console/%2e%2e%2fREADME.md", "/console/api-gateway.service.ts"]) {
      const answer = await http(platform.baseUrl, "GET", bad);
      expect([bad, answer.status]).toEqual([bad, 404]);
      expect(answer.body.error.code).toBe("NOT_FOUND");
    }
  });

  it("console - register, log out, a wrong password in words, log in", async () => {
    await page.goto(`${platform.baseUrl}/console`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill("correct horse battery");
    await shot("01-login");
    await page.getByRole("button", { name: "No account? Register" }).click();
    await page.getByRole("button", { name: "Register", exact: true }).click();
    await page.getByRole("link", { name: "Jobs" }).waitFor();
    for (const name of ["Jobs", "Cluster", "Models", "Databases", "Usage", "Settings"]) await page.getByRole("link", { name, exact: true }).waitFor();
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill("wrong password here");
    await page.getByRole("button", { name: "Log in" }).click();
    const alert = page.getByRole("alert");
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/password/i);
    await page.getByLabel("Password").fill("correct horse battery");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Jobs", exact: true }).waitFor();
    // The session is this tab's (sessionStorage, so a reload keeps it): never localStorage or a cookie.
    expect(await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie])).toEqual([0, 1, ""]);
  });

  it("console - a job: bad input refused in words, then submitted, its output arriving live, listed", async () => {
    await page.goto(`${platform.baseUrl}/console#jobs`).catch(() => undefined);
    await page.getByRole("heading", { name: "Jobs", exact: true }).waitFor();
    await page.getByLabel("Command").fill("echo never");
    await page.getByLabel("Environment").fill("NVIDIA_VISIBLE_DEVICES=all");
    await page.getByRole("button", { name: "Submit job" }).click();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/^Request validation failed: .*NVIDIA_/);
    await page.getByLabel("Environment").fill("GREETING=hi");
    await page.getByLabel("Command").fill('for i in 1 2 3; do echo "$GREETING line $i"; sleep 1; done');
    await page.getByRole("button", { name: "Submit job" }).click();
    const log = page.getByLabel("Job output");
    await waitFor(async () => (await log.textContent())?.includes("hi line 1"), { timeoutMs: 30_000, message: "the first line" });
    // The first line arrived while the job still ran: followed live, not read at the end. (Its node's
    // "running" report travels on its own: the line can overtake it, the badge then still reads queued.)
    expect(await log.textContent()).not.toContain("hi line 3");
    expect(["queued", "running"]).toContain(await page.locator("h1 .badge").textContent());
    await shot("03-job-running");
    await waitFor(async () => (await page.locator("h1 .badge").textContent()) === "completed", { timeoutMs: 30_000, message: "completed" });
    expect(await log.textContent()).toBe("hi line 1\nhi line 2\nhi line 3\n");
    expect(await page.getByRole("button", { name: "Cancel job" }).isDisabled()).toBe(true);
    await page.getByRole("link", { name: "← All jobs" }).click();
    await page.locator("tbody .badge", { hasText: "completed" }).first().waitFor();
    await shot("02-jobs");
  }, 90_000);

  it("console - cluster: a card per GPU with its gauges and the queue depth", async () => {
    await page.getByRole("link", { name: "Cluster" }).click();
    const card = page.locator("article.gpu");
    await card.first().waitFor();
    expect(await card.count()).toBe(1);
    expect(await card.locator("h3").textContent()).toBe("NVIDIA GeForce RTX 3060");
    for (const label of ["Utilization", "Memory", "Temperature"]) expect(await card.getByRole("meter", { name: label }).count()).toBe(1);
    expect(await card.getByRole("meter", { name: "Memory" }).textContent()).toContain("12.0 GiB");
    expect(await page.locator(".stat", { hasText: "Queue depth" }).locator(".stat-value").textContent()).toBe("0");
    // No metrics service in this platform: the history is 503 and the page keeps its own samples, saying so.
    expect(await card.locator("figcaption").textContent()).toBe("Every 3 s while the console is open (the server keeps no history now)");
    expect(historyRefusals).toBeGreaterThanOrEqual(1);
    await shot("04-cluster");
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot("04-cluster-phone");
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it("console - models: a chat reply streams in piece by piece", async () => {
    ollama.set({ gated: true, chunks: ["Hello", ", ", "world", "!"] });
    await page.getByRole("link", { name: "Models" }).click();
    await page.locator("#chat-model option", { hasText: "llama3.2:1b" }).waitFor({ state: "attached" });
    await page.getByLabel("Model").selectOption("llama3.2:1b");
    await page.getByLabel("Prompt", { exact: true }).fill("Say hello");
    await page.getByRole("button", { name: "Send" }).click();
    const reply = page.locator(".msg.assistant").last();
    await waitFor(async () => (await reply.textContent()) === "Hello", { message: "the first chunk" });
    // Only the first chunk has been let go: the reply is still streaming.
    expect(await reply.getAttribute("data-streaming")).toBe("true");
    ollama.release(4);
    await waitFor(async () => (await reply.getAttribute("data-streaming")) === "false", { message: "the end of the stream" });
    expect(await reply.textContent()).toBe("Hello, world!");
    await shot("05-models");
  });

  it("console - models: with tools given, an answer's tool call is shown as a call (name and arguments); tools that are not JSON are refused in words", async () => {
    const sent = ollama.requests.length;
    await page.getByLabel("Tools (JSON)").fill("{ not json");
    await page.getByLabel("Prompt", { exact: true }).fill("Weather in Oslo?");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("alert").filter({ hasText: "Tools: not JSON" }).waitFor();
    expect(ollama.requests.length).toBe(sent);
    ollama.set({ chunks: [], toolCalls: [{ name: "get_weather", arguments: '{"city":"Oslo"}' }], completionTokens: 9 });
    await page
      .getByLabel("Tools (JSON)")
      .fill(JSON.stringify({ name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }));
    await page.getByRole("button", { name: "Send" }).click();
    const call = page.locator(".msg.tool-call").last();
    await call.waitFor();
    ollama.set({});
    expect(await call.textContent()).toBe('tool call get_weather({"city":"Oslo"})');
    expect(ollama.requests.at(-1)?.body.tools).toEqual([expect.objectContaining({ function: expect.objectContaining({ name: "get_weather" }) })]);
    await page.getByLabel("Tools (JSON)").fill("");
    await shot("05b-models-tool-call");
  });

  it("console - databases: created with its password shown once, destroyed only once its name is typed", async () => {
    await page.getByRole("link", { name: "Databases" }).click();
    await page.getByRole("button", { name: "Create database" }).click();
    const password = page.locator('input[data-secret="Password"]');
    await password.waitFor();
    const secret = await password.inputValue();
    expect(secret).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(await page.locator('input[data-secret="Connection string"]').inputValue()).toContain(`:${secret}@`);
    expect(await page.locator(".once .warning").textContent()).toMatch(/only once/);
    await page.locator("article.db").first().waitFor();
    await shot("06-databases-created");
    // Left and come back: the password is nowhere on the page any more.
    // The job's GPU seconds reach the ledger on their own: once they have, the Usage page shows them today.
    const token = (await http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password: "correct horse battery" } })).body.accessToken;
    await waitFor(async () => (await http(platform.baseUrl, "GET", "/api/usage", { token })).body.gpu.gpuSeconds > 0, {
      message: "the job's GPU seconds recorded",
    });
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByRole("heading", { name: "This month against your quotas" }).waitFor();
    // Quotas: an unlimited one is an empty track that says so, a limited one its share.
    const quotas = page.locator("section.card", { hasText: "This month against your quotas" });
    expect(await quotas.getByRole("meter", { name: "GPU seconds" }).getAttribute("aria-valuetext")).toMatch(/^[\d.,]+ · no limit$/);
    expect(await quotas.getByRole("meter", { name: "GPU seconds" }).locator(".bar-fill").getAttribute("style")).toMatch(/width: 0(\.0)?%/);
    expect(await quotas.getByRole("meter", { name: "Databases" }).getAttribute("aria-valuetext")).toBe("1 / 5");
    // A split by GPU type is a share of a whole, not a limit: never the red of a quota nearly spent.
    const byType = page.locator("section.card", { hasText: "GPU seconds by GPU type" });
    expect(await byType.getByRole("meter").count()).toBe(1);
    expect(await byType.locator(".bar-fill.hot").count()).toBe(0);
    // The month day by day: a column per UTC day so far in each chart, titled with its day and value.
    await page.getByRole("heading", { name: "GPU seconds per day" }).waitFor();
    const charts = page.locator("figure.chart");
    expect(await charts.count()).toBe(4);
    const today = new Date().getUTCDate();
    const gpuDays = charts.first().locator(".col");
    expect(await gpuDays.count()).toBe(today);
    expect(await gpuDays.last().getAttribute("title")).toMatch(new RegExp(`^[A-Z][a-z]{2} ${today}: [\\d.,]+ s$`));
    expect(Number(await gpuDays.last().getAttribute("data-value"))).toBeGreaterThan(0);
    expect(await charts.first().getByRole("img").getAttribute("aria-label")).toMatch(/^GPU seconds per day: [\d.,]+ s this month, at most [\d.,]+ on one day$/);
    await shot("07-usage");
    // The day windows asked for: UTC days, today's ending now, none past the month's end (leap days included).
    const windows = (await page.evaluate(
      `import("/console/usage.js").then(({ daysOfMonth }) => ["2026-03-31T23:59:00Z", "2026-03-01T00:00:00Z", "2028-02-29T12:00:00Z"]
        .map((t) => daysOfMonth(new Date(t)).map((d) => [d.day, d.from.toISOString(), d.to.toISOString()])))`,
    )) as Array<Array<[number, string, string]>>;
    expect(windows.map((w) => w.length)).toEqual([31, 1, 29]);
    expect(windows[0][0]).toEqual([1, "2026-03-01T00:00:00.000Z", "2026-03-02T00:00:00.000Z"]);
    expect(windows[0][30]).toEqual([31, "2026-03-31T00:00:00.000Z", "2026-03-31T23:59:00.000Z"]);
    expect(windows[1][0]).toEqual([1, "2026-03-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]); // not asked: an empty window
    expect(windows[2][27][2]).toBe("2028-02-29T00:00:00.000Z");
    await page.getByRole("link", { name: "Databases" }).click();
    const db = page.locator("article.db");
    await db.first().waitFor();
    expect(await page.content()).not.toContain(secret);
    expect(await db.getByRole("meter", { name: "Storage" }).count()).toBe(1);
    const name = (await db.locator("h3").textContent())!.trim();
    await db.getByText("Destroy…").click();
    const destroy = db.getByRole("button", { name: "Destroy" });
    await db.getByLabel(`Type ${name} to confirm`).fill(name.slice(0, -1));
    expect(await destroy.isDisabled()).toBe(true);
    await db.getByLabel(`Type ${name} to confirm`).fill(name);
    await shot("08-databases-destroy");
    await destroy.click();
    await page.getByText("No databases yet").waitFor();
  });

  it("console - settings: an API key shown once that the API accepts", async () => {
    await page.getByRole("link", { name: "Settings" }).click();
    await page.getByRole("button", { name: "Create API key" }).click();
    const key = await page.locator('input[data-secret="API key"]').inputValue();
    expect(key).toMatch(/^ci_/);
    expect((await http(platform.baseUrl, "GET", "/api/auth/me", { headers: { "X-API-Key": key } })).body.email).toBe(email);
    await shot("09-settings");
  });

  it("console - settings: a token made with its scopes and limits, shown once, listed without its secret, deleted", async () => {
    const tokens = page.locator("section.card", { has: page.getByRole("heading", { name: "Tokens" }) });
    await tokens.getByLabel("Name").fill("ci agent");
    await tokens.getByRole("button", { name: "Create token" }).click();
    // No scope ticked: the API's refusal in words, nothing made.
    await tokens.getByRole("alert").waitFor();
    await tokens.getByLabel("inference").check();
    await tokens.getByLabel("usage:read").check();
    await tokens.getByLabel("Expires in").selectOption({ label: "7 days" });
    await tokens.getByLabel("Max credits").fill("3");
    await tokens.getByRole("button", { name: "Create token" }).click();
    const secret = await tokens.locator('input[data-secret="Token"]').inputValue();
    expect(secret).toMatch(/^cit_[a-z0-9]{32}$/);
    expect((await http(platform.baseUrl, "GET", "/api/auth/me", { token: secret })).body.email).toBe(email);
    const row = tokens.locator("tbody tr", { hasText: "ci agent" });
    await row.waitFor();
    expect(await row.locator("td").allTextContents()).toEqual(["ci agent", "inference, usage:read", "—", expect.any(String), "0 / 3", "—", "—", "Delete"]);
    await shot("10-settings-tokens");
    await row.getByRole("button", { name: "Delete token ci agent" }).click();
    await tokens.getByText("No tokens yet").waitFor();
    expect(await page.content()).not.toContain(secret);
    await waitFor(async () => (await http(platform.baseUrl, "GET", "/api/auth/me", { token: secret })).status === 401, { message: "the token refused" });
  });

  it("console - a job's page shows the platform access it was given, never its token", async () => {
    const jwt = (await http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password: "correct horse battery" } })).body.accessToken;
    const platformAccess = { scopes: ["inference", "jobs:read"], models: ["llama3.2:1b"] };
    const job = (await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token: jwt, body: { command: "sleep 30", platformAccess } })).body;
    await page.goto(`${platform.baseUrl}/console#jobs/${job.id}`).catch(() => undefined);
    const fact = (name: string) => page.locator(`dt:text-is("${name}") + dd`);
    await fact("Platform scopes").waitFor();
    expect([await fact("Platform scopes").textContent(), await fact("Platform models").textContent()]).toEqual(["inference, jobs:read", "llama3.2:1b"]);
    await shot("11-job-platform-access");
    expect(await page.content()).not.toContain("cit_");
    // The job itself ends by itself here (this test's node has no relay: GPU_RELAY_PLATFORM_URL is unset); the page never showed a secret.
  });

  it("console - nothing was loaded from elsewhere and nothing failed in the page", () => {
    const foreign = requested.filter((url) => !url.startsWith(platform.baseUrl) && !url.startsWith("data:"));
    expect(foreign).toEqual([]);
    // Errors logged by the browser are the API's refusals the tests caused on purpose (their 4xx), nothing else.
    // …and the cluster history's 503s (no metrics service here), as many as were answered.
    let refusals = historyRefusals;
    const unexpected = problems.filter((p) => !/status of 4\d\d/.test(p) && !(/status of 503/.test(p) && refusals-- > 0));
    expect(unexpected).toEqual([]);
  });
});
