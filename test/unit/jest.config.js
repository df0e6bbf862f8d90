/**
 * `npm run test:unit`: the pure tests, in seconds, with no server (no global set-up checking for
 * one) and no program installed by .ci/setup.d. `npm test` runs them too, with everything else.
 */
const base = require("../../jest.config.js");

module.exports = {
  ...base,
  rootDir: "../..",
  roots: ["<rootDir>/test/unit"],
  globalSetup: undefined,
  testPathIgnorePatterns: [
    "/node_modules/",
    // They run docker-compose, docker compose and nats-server (.ci/setup.d/41-docker-compose.sh, 35-nats-server.sh).
    "/test/unit/ops\\.compose\\.test\\.ts$",
    "/test/unit/platform\\.bus-passwords\\.test\\.ts$",
  ],
};
