/** Debian's Chromium, headless, for the browser tests (playwright-core drives it; nothing is downloaded). */
import fs from "fs";
import { Browser, chromium } from "playwright-core";

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
