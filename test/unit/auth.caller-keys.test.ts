import { generateKeyPairSync } from "crypto";
import { CallerKeySettings, callerSigner, callerVerifier, checkCallerKeys, liveCallerMeta } from "../../lib/caller-keys";
import { privateKeyFrom, rawPublicKeyOf } from "../../lib/caller-token";
import { parsePlatformSettings } from "../../lib/platform-settings";

const VARS = ["NODE_ENV", "CALLER_SIGNING_KEY", "CALLER_VERIFY_KEY"] as const;
const caller = { clientId: "4b6f1c2e-0000-4000-8000-000000000001", role: "client", via: "jwt" as const };

describe("auth - caller keys from the environment", () => {
  // The settings a process with these variables parses (lib/platform-settings.ts).
  let keys: CallerKeySettings = parsePlatformSettings({});
  const setEnv = (env: Partial<Record<(typeof VARS)[number], string>>) => {
    keys = parsePlatformSettings(env);
  };

  const seed = Buffer.alloc(32, 3).toString("base64");
  const pub = rawPublicKeyOf(privateKeyFrom(seed));

  it("auth - production refuses to start a gateway without CALLER_SIGNING_KEY", () => {
    setEnv({ NODE_ENV: "production", CALLER_VERIFY_KEY: pub });
    expect(() => checkCallerKeys({ sign: true, verify: true }, keys)).toThrow(/CALLER_SIGNING_KEY is required/);
  });

  it("auth - production refuses to start a service with account actions without a verify key", () => {
    setEnv({ NODE_ENV: "production" });
    expect(() => checkCallerKeys({ sign: false, verify: true }, keys)).toThrow(/CALLER_VERIFY_KEY is required/);
    expect(checkCallerKeys({ sign: false, verify: false }, keys)).toBeUndefined(); // e.g. a gpu-node: needs none
  });

  it("auth - production with the public key only verifies, and cannot sign", () => {
    setEnv({ NODE_ENV: "production", CALLER_VERIFY_KEY: pub });
    expect(checkCallerKeys({ sign: false, verify: true }, keys)).toBeUndefined();
    expect(() => callerSigner(keys).tokenFor(caller)).toThrow(/CALLER_SIGNING_KEY is required/);
    setEnv({ NODE_ENV: "production", CALLER_SIGNING_KEY: seed });
    const token = callerSigner(keys).tokenFor(caller);
    setEnv({ NODE_ENV: "production", CALLER_VERIFY_KEY: pub });
    expect(callerVerifier(keys).check(token)).toEqual({ caller });
  });

  it("auth - outside production the development pair is used, with a warning", () => {
    setEnv({});
    expect(checkCallerKeys({ sign: true, verify: true }, keys)).toMatch(/development key pair/);
    expect(callerVerifier(keys).check(callerSigner(keys).tokenFor(caller))).toEqual({ caller });
  });

  it("auth - a verify key that does not match the signing key, or a malformed key, fails the start", () => {
    setEnv({ CALLER_SIGNING_KEY: seed, CALLER_VERIFY_KEY: rawPublicKeyOf(generateKeyPairSync("ed25519").privateKey) });
    expect(() => checkCallerKeys({ sign: true, verify: true }, keys)).toThrow(/not the public key/);
    setEnv({ CALLER_VERIFY_KEY: "short" });
    expect(() => checkCallerKeys({ sign: false, verify: true }, keys)).toThrow(/32 bytes/);
  });
});

describe("auth - meta for trusted in-process callers", () => {
  const keys = parsePlatformSettings({}); // the development pair liveCallerMeta signs with by default
  it("auth - live meta always carries a token that verifies, and ignores writes", () => {
    const meta = liveCallerMeta(caller);
    expect(callerVerifier(keys).check(meta.callerToken)).toEqual({ caller });
    meta.callerToken = "forged";
    expect(callerVerifier(keys).check(meta.callerToken)).toEqual({ caller });
    expect(JSON.parse(JSON.stringify(meta))).toEqual({ caller, callerToken: expect.any(String) });
  });
});
