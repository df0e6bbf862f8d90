#!/usr/bin/env node
// The CLI: its build (`npm run build:cli`, dist/cli/ci-platform.js) while that is newer than every
// source file it was made from, else its TypeScript sources through tsx (a dependency), as the
// platform runs. The check reads the modification times of about 40 files.
const fs = require("fs");
const path = require("path");

const ROOT = path.join(__dirname, "..");
const BUILT = path.join(ROOT, "dist/cli/ci-platform.js");
const SOURCES = ["clients/cli/src", "clients/sdk/src"].map((dir) => path.join(ROOT, dir));

function newestSource(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(file) : fs.statSync(file).mtimeMs);
  }
  return newest;
}

function builtIsCurrent() {
  try {
    const built = fs.statSync(BUILT).mtimeMs;
    return SOURCES.every((dir) => !fs.existsSync(dir) || newestSource(dir) <= built);
  } catch {
    return false;
  }
}

let cli;
if (builtIsCurrent()) cli = require(BUILT);
else {
  require("tsx/cjs");
  cli = require("../clients/cli/src/main.ts");
}
cli.main().catch((err) => {
  process.stderr.write(`error: ${err && err.message ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
