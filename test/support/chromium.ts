/** Debian's Chromium, headless, for the browser tests (playwright-core drives it; nothing is downloaded). */
import fs from "fs";
import { Browser, chromium, Page } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

export function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run .ci/setup.d/40-chromium.sh`);
  return chromium.launch({
    executablePath: CHROMIUM,
    // No background traffic: the tests check that pages load nothing from elsewhere.
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Collects the page's uncaught errors and the errors its console logs (failed loads included) into `problems`. */
export function watchProblems(page: Page, problems: string[]): void {
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => msg.type() === "error" && problems.push(`console: ${msg.text()}`));
}
