/**
 * The API reference page in a real browser (Debian's Chromium, headless, driven by
 * playwright-core): /api/docs renders from this origin only and lists every endpoint of
 * /api/openapi.json.
 */
import type { Browser } from "playwright-core";
import { launchChromium } from "../support/chromium";
import { http, startTestPlatform, TestPlatform, waitForRoute } from "../support/platform";

describe("ops - API reference page in Chromium", () => {
  let platform: TestPlatform;
  let browser: Browser;

  beforeAll(async () => {
    platform = await startTestPlatform({ env: { OLLAMA_URL: "off", GPU_EXECUTOR: "process" } });
    for (const [method, path] of [
      ["POST", "/api/auth/login"],
      ["GET", "/api/gpu/status"],
      ["GET", "/api/models"],
      ["GET", "/api/databases"],
    ])
      await waitForRoute(platform.baseUrl, method, path);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await platform?.stop();
  });

  it("ops - /api/docs renders every operation of the OpenAPI document, loading nothing from elsewhere", async () => {
    const doc = (await http(platform.baseUrl, "GET", "/api/openapi.json")).body as { paths: Record<string, Record<string, unknown>> };
    const expected = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    expect(expected.length).toBeGreaterThan(15);

    const page = await browser.newPage();
    const requested: string[] = [];
    const problems: string[] = [];
    page.on("request", (req) => requested.push(req.url()));
    page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    page.on("console", (msg) => msg.type() === "error" && problems.push(`console: ${msg.text()}`));

    const response = await page.goto(`${platform.baseUrl}/api/docs`);
    expect(response?.status()).toBe(200);
    await page.waitForSelector(".opblock-summary-path", { timeout: 20_000 });
    await page.waitForFunction((n) => document.querySelectorAll(".opblock").length >= n, expected.length, { timeout: 20_000 });

    const rendered = await page.$$eval(".opblock", (blocks) =>
      blocks.map((b) => {
        const method = b.querySelector(".opblock-summary-method")?.textContent?.trim() ?? "";
        const path = b.querySelector(".opblock-summary-path")?.getAttribute("data-path") ?? "";
        return `${method.toUpperCase()} ${path}`;
      }),
    );
    expect([...new Set(rendered)].sort()).toEqual(expected);
    expect(await page.title()).toBe("ci-platform API reference");
    expect(await page.textContent(".info .title")).toContain("ci-platform API");

    expect(problems).toEqual([]);
    const foreign = requested.filter((url) => !url.startsWith(platform.baseUrl) && !url.startsWith("data:"));
    expect(foreign).toEqual([]);
    expect(requested).toEqual(expect.arrayContaining([`${platform.baseUrl}/api/openapi.json`, `${platform.baseUrl}/api/docs/swagger-ui-bundle.js`]));
    await page.close();
  });
});
