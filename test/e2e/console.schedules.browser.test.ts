/**
 * The console's Schedules page in Debian's Chromium (playwright-core): the account's schedules as
 * GET /api/gpu/schedules returns them (cron, time zone, concurrency, paused, next and last run, the
 * last job, the ticks skipped), another account's absent; pause, resume and delete through the
 * page, each checked against the API. Screenshots at desktop and phone widths go to test-results/console/.
 */
import fs from "fs";
import path from "path";
import { Client } from "pg";
import type { Browser, Page } from "playwright-core";
import { launchChromium, watchProblems } from "../support/chromium";
import { http, ROOT, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const SHOTS = path.join(ROOT, "test-results", "console");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 860 };

describe("console - schedules in Chromium", () => {
  let platform: TestPlatform;
  let browser: Browser;
  let page: Page;
  let alice: string;
  let bob: string;
  const problems: string[] = [];
  const email = `console-sched-${Date.now()}@example.com`;
  const password = "correct horse battery";
  const api = (method: string, route: string, token: string, body?: unknown) => http(platform.baseUrl, method, route, { token, body });
  const row = (id: string) => page.locator(`tr[data-id="${id}"]`);
  /** The row's cells, in the columns' order, as shown. */
  const cells = (id: string) => row(id).locator("td").allInnerTexts();

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    platform = await startTestPlatform({ services: ["api-gateway", "auth", "gpu-scheduler"] });
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/register", 30_000);
    await waitForRoute(platform.baseUrl, "GET", "/api/gpu/schedules", 30_000);
    alice = (await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, password, name: "Sched" } })).body.accessToken;
    const other = { email: `other-${email}`, password, name: "Other" };
    bob = (await http(platform.baseUrl, "POST", "/api/auth/register", { body: other })).body.accessToken;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: DESKTOP });
    watchProblems(page, problems);
    // The browser's own favicon request (the console has none): not a problem of the page.
    await page.route("**/favicon.ico", (r) => r.fulfill({ status: 204 }));
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await platform?.stop();
  });

  it("console - the Schedules page lists the account's schedules with their runs; pause, resume and delete act through the API", async () => {
    const create = async (token: string, body: Record<string, unknown>) => {
      const res = await api("POST", "/api/gpu/schedules", token, { job: { command: "true" }, ...body });
      expect(res.status).toBe(201);
      return res.body;
    };
    const nightly = await create(alice, { name: "nightly-eval", cron: "0 3 * * *", timezone: "Europe/Berlin", concurrency: "forbid" });
    const hourly = await create(alice, { name: "hourly-sync", cron: "0 * * * *", concurrency: "replace", paused: true });
    const theirs = await create(bob, { name: "bobs-schedule", cron: "*/5 * * * *" });
    // Runs happened: what a tick writes (its time, its job, ticks skipped), without waiting for one.
    const lastJobId = "0b7c6a52-8c8e-4d0a-9a55-3b1f0f6f1e01";
    const lastRunAt = "2026-11-26T02:00:00.000Z";
    const db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
    try {
      await db.query(`UPDATE gpu_scheduler.schedules SET last_run_at = $2, last_job_id = $3, runs = 3, skipped = 2 WHERE id = $1`, [
        nightly.id,
        lastRunAt,
        lastJobId,
      ]);
    } finally {
      await db.end();
    }

    await page.goto(`${platform.baseUrl}/console#schedules`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Schedules", exact: true }).waitFor();
    await row(nightly.id).waitFor();
    const shown = (iso: string) => page.evaluate((s) => new Date(s).toLocaleString(), iso);
    expect(await cells(nightly.id)).toEqual([
      "nightly-eval",
      "0 3 * * *",
      "Europe/Berlin",
      "forbid",
      "active",
      await shown(nightly.nextRunAt),
      await shown(lastRunAt),
      lastJobId.slice(0, 8),
      "2",
      expect.stringMatching(/Pause\s*Delete/),
    ]);
    expect(await row(nightly.id).getByRole("link").getAttribute("href")).toBe(`#jobs/${lastJobId}`);
    expect((await cells(hourly.id)).slice(0, 9)).toEqual(["hourly-sync", "0 * * * *", "UTC", "replace", "paused", "—", "—", "—", "0"]);
    // Another account's schedule is not listed.
    expect(await row(theirs.id).count()).toBe(0);
    expect(await page.locator("tbody tr").count()).toBe(2);
    await page.screenshot({ path: path.join(SHOTS, "20-schedules.png"), fullPage: true });
    await page.setViewportSize(PHONE);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(PHONE.width);
    await page.screenshot({ path: path.join(SHOTS, "20-schedules-phone.png"), fullPage: true });
    await page.setViewportSize(DESKTOP);

    const detail = async (id: string, token = alice) => (await api("GET", `/api/gpu/schedules/${id}`, token)).body;
    // Pause: the API says paused, without a next run; the row says so.
    await page.getByRole("button", { name: "Pause schedule nightly-eval" }).click();
    await page.getByRole("button", { name: "Resume schedule nightly-eval" }).waitFor();
    expect(await detail(nightly.id)).toMatchObject({ paused: true, nextRunAt: null });
    expect((await cells(nightly.id)).slice(4, 6)).toEqual(["paused", "—"]);
    // Resume: a next run again.
    await page.getByRole("button", { name: "Resume schedule nightly-eval" }).click();
    await page.getByRole("button", { name: "Pause schedule nightly-eval" }).waitFor();
    const resumed = await detail(nightly.id);
    expect(resumed).toMatchObject({ paused: false, nextRunAt: expect.any(String) });
    expect((await cells(nightly.id)).slice(4, 6)).toEqual(["active", await shown(resumed.nextRunAt)]);
    // Delete: gone from the page and the API; the other account's schedule untouched.
    await page.getByRole("button", { name: "Delete schedule hourly-sync" }).click();
    await waitFor(async () => (await row(hourly.id).count()) === 0, { message: "the deleted schedule's row gone" });
    expect((await api("GET", `/api/gpu/schedules/${hourly.id}`, alice)).status).toBe(404);
    expect((await detail(theirs.id, bob)).name).toBe("bobs-schedule");
    // The last one deleted: the empty state says how to create one.
    await page.getByRole("button", { name: "Delete schedule nightly-eval" }).click();
    await page.getByText("No schedules yet").waitFor();
    expect(await page.locator(".copy-line code").textContent()).toMatch(/^ci-platform schedules create /);
    expect(problems).toEqual([]);
  });
});
