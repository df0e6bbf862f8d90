/**
 * Where the caller-token keys come from: CALLER_SIGNING_KEY (gateway) and CALLER_VERIFY_KEY
 * (every service with account actions; derived from the signing key when only that is set).
 * Outside production a fixed development pair stands in (with a warning); in production a
 * process that needs a key and has none refuses to start.
 */
import { createHash, createPublicKey } from "crypto";
import type { PlatformSettings } from "./platform-settings";
import type { Caller } from "./identity";
import { CallerTokenSigner, CallerTokenVerifier, privateKeyFrom, publicKeyFrom, rawPublicKeyOf } from "./caller-token";

// Public on purpose: anyone can sign with it, so it is refused in production.
const DEV_SEED = createHash("sha256").update("ci-platform development caller key").digest().toString("base64");

/** The key settings of a process (lib/platform-settings.ts); `{ production: false }`: the development pair. */
export type CallerKeySettings = Pick<PlatformSettings, "production" | "callerSigningKey" | "callerVerifyKey">;

const DEVELOPMENT: CallerKeySettings = { production: false };

type Keys = { signer: CallerTokenSigner; verifier: CallerTokenVerifier; development: boolean };

let cached: { source: string; keys: Keys } | undefined;

function missingSigningKey(): never {
  throw new Error("CALLER_SIGNING_KEY is required to sign caller tokens (the api-gateway holds it)");
}

// A process with only the public key verifies; signing there must fail loudly, never fall back.
const NO_SIGNER = { tokenFor: missingSigningKey } as unknown as CallerTokenSigner;

function build(signingText: string | undefined, verifyText: string | undefined): Keys {
  const development = !signingText && !verifyText;
  const seed = signingText ?? (development ? DEV_SEED : undefined);
  const privateKey = seed ? privateKeyFrom(seed) : undefined;
  const publicKey = verifyText ? publicKeyFrom(verifyText) : createPublicKey(privateKey!);
  if (privateKey && verifyText && rawPublicKeyOf(privateKey) !== rawPublicKeyOf(publicKey))
    throw new Error("CALLER_VERIFY_KEY is not the public key of CALLER_SIGNING_KEY");
  return { signer: privateKey ? new CallerTokenSigner(privateKey) : NO_SIGNER, verifier: new CallerTokenVerifier(publicKey), development };
}

/** The keys of these settings (built again when they differ from the last ones, as in tests). */
function current(settings: CallerKeySettings): Keys {
  const signingText = settings.callerSigningKey;
  const verifyText = settings.callerVerifyKey;
  const source = `${signingText ?? ""}\n${verifyText ?? ""}`;
  if (cached?.source !== source) cached = { source, keys: build(signingText, verifyText) };
  return cached.keys;
}

export const callerSigner = (settings: CallerKeySettings): CallerTokenSigner => current(settings).signer;
export const callerVerifier = (settings: CallerKeySettings): CallerTokenVerifier => current(settings).verifier;

/**
 * Checked once when a broker starts: `needs` says which keys its local services use. Returns a
 * warning to log when the development pair is in use; throws when production lacks a key.
 */
export function checkCallerKeys(needs: { sign: boolean; verify: boolean }, settings: CallerKeySettings): string | undefined {
  if (!needs.sign && !needs.verify) return undefined;
  const signingText = settings.callerSigningKey;
  const verifyText = settings.callerVerifyKey;
  if (settings.production) {
    if (needs.sign && !signingText) throw new Error("CALLER_SIGNING_KEY is required when NODE_ENV=production (api-gateway)");
    if (needs.verify && !signingText && !verifyText) throw new Error("CALLER_VERIFY_KEY is required when NODE_ENV=production (services with account actions)");
  }
  if (needs.sign && !signingText && verifyText) missingSigningKey();
  const keys = current(settings); // parses the keys now: a malformed key fails the start, not a request
  return keys.development ? "CALLER_SIGNING_KEY / CALLER_VERIFY_KEY unset: using the public development key pair (never in production)" : undefined;
}

/** Meta for a call made on behalf of `caller` by trusted in-process code (tests, operator scripts); default: the development keys. */
export function signedCallerMeta(caller: Caller, settings: CallerKeySettings = DEVELOPMENT): { caller: Caller; callerToken: string } {
  return { caller, callerToken: callerSigner(settings).tokenFor(caller) };
}

/** The same, for meta kept across a long test or script: every read of callerToken is still valid. */
export function liveCallerMeta(caller: Caller, settings: CallerKeySettings = DEVELOPMENT): { caller: Caller; callerToken: string } {
  return {
    caller,
    get callerToken() {
      return callerSigner(settings).tokenFor(caller); // re-signed once half its lifetime has passed
    },
    set callerToken(_ignored: string) {
      // always derived from caller (the Auth middleware may write it back after a remote call)
    },
  };
}
