/**
 * The console's Databases page against a platform with point-in-time restore and a pooler
 * (.ci/setup.d/30-tenant-postgres.sh, 31-tenant-pgbouncer.sh) in Debian's Chromium: a database's
 * status and pooled endpoint, its restore picker bounded by the detail's restoreWindow (a moment
 * outside it sends nothing), a restore sending restoreFrom and showing the 202's new password (direct
 * and pooled strings) once, and the new database shown restoring until the page sees it active.
 */
import type { Browser, Page, Request } from "playwright-core";
import { launchChromium, watchProblems } from "../support/chromium";
import { pitrTestEnv } from "../support/pitr";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

const POOLER_PORT = process.env.TENANT_POOLER_PORT ?? "6433";

describe("console - databases: status, pooled endpoint and point-in-time restore in Chromium", () => {
  let platform: TestPlatform;
  let browser: Browser;
  let page: Page;
  let token: string;
  const problems: string[] = [];
  const email = `${uniqueName("console-db")}@example.com`;
  const password = "correct horse battery";
  const sent: Request[] = [];
  /** Refused requests: other pages' services (gpu, usage) are not started here; the databases' must all succeed. */
  const refused: string[] = [];
  const restores = () => sent.filter((r) => r.method() === "POST" && new URL(r.url()).pathname === "/api/databases");

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "dbaas"],
      env: { ...pitrTestEnv(), DBAAS_POOLED_PORT: POOLER_PORT, DBAAS_RECONCILE_S: "3600", DBAAS_QUOTA_CHECK_S: "3600" },
    });
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/register");
    await waitForRoute(platform.baseUrl, "GET", "/api/databases");
    token = (await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, password, name: "DB" } })).body.accessToken;
    await platform.broker.call("dbaas.baseBackup");
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.on("request", (req) => sent.push(req));
    page.on("response", (res) => res.status() >= 400 && refused.push(`${res.status()} ${new URL(res.url()).pathname}`));
    watchProblems(page, problems);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await platform?.stop();
  });

  it("console - databases: the restore picker is bounded by the window, sends restoreFrom, and shows the new database restoring until active", async () => {
    const created = await http(platform.baseUrl, "POST", "/api/databases", { token, body: {} });
    expect(created.status).toBe(201);
    // Until its window holds a whole second (the picker's step), the picker has nothing to offer.
    const source = await waitFor(
      async () => {
        const db = (await http(platform.baseUrl, "GET", `/api/databases/${created.body.id}`, { token })).body;
        const w = db.restoreWindow;
        return w && Math.ceil(Date.parse(w.earliest) / 1000) <= Math.floor(Date.parse(w.latest) / 1000) ? db : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100, message: "a restore window of a whole second" },
    );
    await page.goto(`${platform.baseUrl}/console`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).click();
    const listed = page.waitForResponse((r) => r.request().method() === "GET" && new URL(r.url()).pathname === "/api/databases").then((r) => r.json());
    await page.getByRole("link", { name: "Databases", exact: true }).click();
    const card = page.locator(`article.db[aria-label="${source.databaseName}"]`);
    await card.locator(".db-status .badge", { hasText: "active" }).waitFor();
    expect((await card.locator("h3").textContent())!.trim()).toBe(source.databaseName);
    expect(await card.textContent()).toContain(`pooled (transaction mode): ${source.username}@${source.pooledHost}:${POOLER_PORT}`);

    // The picker's bounds are the window's, to the second (earliest rounded up, latest down).
    await card.getByText("Restore to a point in time…").click();
    const at = card.getByLabel("Restore to");
    // (The window the page was given: its latest moves on as WAL is archived.)
    const shown = (await listed).databases.find((d: { id: string }) => d.id === source.id).restoreWindow;
    const bounds = await at.evaluate((el: HTMLInputElement) => [el.min, el.max].map((v) => new Date(v).toISOString()));
    const second = (iso: string, up: boolean) => new Date((up ? Math.ceil : Math.floor)(Date.parse(iso) / 1000) * 1000).toISOString();
    expect(bounds).toEqual([second(shown.earliest, true), second(shown.latest, false)]);
    expect(second(shown.earliest, true)).toBe(second(source.restoreWindow.earliest, true));

    // Before the window: the browser refuses it and nothing is sent.
    const before = await at.evaluate((el: HTMLInputElement) => {
      const d = new Date(new Date(el.min).getTime() - 60_000);
      const pad = (n: number) => String(n).padStart(2, "0");
      return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    });
    await at.fill(before);
    await card.getByRole("button", { name: "Restore into a new database" }).click();
    expect(await at.evaluate((el: HTMLInputElement) => el.validity.rangeUnderflow)).toBe(true);
    expect(restores()).toEqual([]);

    // The window's latest second: restoreFrom sent, 202 restoring, the new password shown once.
    const max = await at.getAttribute("max");
    await at.fill(max!);
    const [request, response] = await Promise.all([
      page.waitForRequest((r) => r.method() === "POST" && new URL(r.url()).pathname === "/api/databases"),
      page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/api/databases"),
      card.getByRole("button", { name: "Restore into a new database" }).click(),
    ]);
    const timestamp = second(shown.latest, false);
    expect(request.postDataJSON()).toEqual({ restoreFrom: { databaseId: source.id, timestamp } });
    const restored = await response.json();
    expect([response.status(), restored.status]).toEqual([202, "restoring"]);
    const once = page.locator(".once");
    expect(await once.locator('input[data-secret="Password"]').inputValue()).toBe(restored.password);
    expect(await once.locator('input[data-secret="Pooled connection string"]').inputValue()).toBe(restored.pooledConnectionString);
    expect(restored.pooledConnectionString).toContain(`:${restored.password}@${source.pooledHost}:${POOLER_PORT}/`);

    // Shown restoring (no actions, no destroy) until the page's own refresh sees it active.
    const row = page.locator(`article.db[aria-label="${restored.databaseName}"]`);
    const badge = row.locator(".db-status .badge");
    await badge.waitFor();
    const first = await badge.textContent();
    if (first === "restoring") {
      expect(await row.getByText("Destroy…").count()).toBe(0);
      await row.locator(".db-status .badge", { hasText: "active" }).waitFor({ timeout: 180_000 });
    } else expect(first).toBe("active"); // a fast machine: already restored by the list's first look
    await row.getByText("Destroy…").waitFor();
    for (const id of [restored.id, source.id]) expect((await http(platform.baseUrl, "DELETE", `/api/databases/${id}`, { token })).status).toBe(200);
    // A window that holds no whole second yet (begun 0.7 s into a second, read 0.2 s later): nothing to pick, and it says so.
    // (A string: the page runs it as written, its import() untouched by the test's compiler.)
    const emptyPicker = await page.evaluate(`(async () => {
      const { restorePicker } = await import("/console/database-restore.js");
      const second = Math.floor(Date.now() / 1000) * 1000;
      const restoreWindow = { earliest: new Date(second + 700).toISOString(), latest: new Date(second + 900).toISOString() };
      const picker = restorePicker({ id: "x", databaseName: "x", restoreWindow }, () => undefined);
      return { button: picker.querySelector("button").disabled, input: picker.querySelector("input").disabled, text: picker.textContent };
    })()`);
    expect(emptyPicker).toMatchObject({ button: true, input: true, text: expect.stringContaining("no whole second yet") });
    expect(refused.filter((r) => /\/api\/(databases|snapshots)/.test(r))).toEqual([]);
    // Nothing failed in the page but those refusals (the console's other pages' services).
    expect(problems.filter((p) => !/status of (404|503)/.test(p))).toEqual([]);
  }, 240_000);
});
