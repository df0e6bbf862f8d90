/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  transform: { "^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.json", diagnostics: false }] },
  testTimeout: 60000,
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  // Console output of passing files withheld (test/support/quiet-reporter.js); buffered per file for that.
  verbose: false,
  reporters: ["<rootDir>/test/support/quiet-reporter.js", "summary", "<rootDir>/test/support/summary-reporter.js"],
};
