/**
 * Makes the Ed25519 key pair of signed caller tokens (README "Caller identity on the bus"):
 * the public key (CALLER_VERIFY_KEY) goes into the env file every service reads, the private key
 * (CALLER_SIGNING_KEY) into a file only the api-gateway reads. Keys already set are kept.
 *   npm run caller:keys -- [--env-out .env] [--gateway-env-out .env.gateway] [--rotate]
 */
import fs from "fs";
import { updateEnvFile } from "../lib/bus-setup";
import { generateCallerKeyPair } from "../lib/caller-token";

function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && process.argv[at + 1] ? process.argv[at + 1] : fallback;
}

const envFile = arg("env-out", ".env");
const gatewayEnvFile = arg("gateway-env-out", ".env.gateway");
const rotate = process.argv.includes("--rotate");
const hasKey = fs.existsSync(gatewayEnvFile) && /^CALLER_SIGNING_KEY=(?!CHANGE-ME)./m.test(fs.readFileSync(gatewayEnvFile, "utf8"));

if (hasKey && !rotate) {
  console.log(`${gatewayEnvFile}: CALLER_SIGNING_KEY kept (--rotate replaces it)`);
} else {
  // Both halves are written together, so they always match.
  const pair = generateCallerKeyPair();
  updateEnvFile(gatewayEnvFile, { CALLER_SIGNING_KEY: pair.signingKey }, true);
  updateEnvFile(envFile, { CALLER_VERIFY_KEY: pair.verifyKey }, true);
  console.log(`${gatewayEnvFile}: CALLER_SIGNING_KEY (api-gateway only); ${envFile}: CALLER_VERIFY_KEY (every service)`);
}
