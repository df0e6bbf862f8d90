#!/usr/bin/env node
// The CLI runs from its TypeScript sources through tsx (a dependency), as the platform does.
require("tsx/cjs");
require("../clients/cli/src/main.ts")
  .main()
  .catch((err) => {
    process.stderr.write(`error: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
