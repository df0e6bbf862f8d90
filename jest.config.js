/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  transform: { "^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.json", diagnostics: false }] },
  testTimeout: 60000,
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  reporters: ["default", "<rootDir>/test/support/summary-reporter.js"],
};
