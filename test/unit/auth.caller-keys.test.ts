import { generateKeyPairSync } from "crypto";
import { callerSigner, callerVerifier, checkCallerKeys, liveCallerMeta } from "../../lib/caller-keys";
import { privateKeyFrom, rawPublicKeyOf } from "../../lib/caller-token";

const VARS = ["NODE_ENV", "CALLER_SIGNING_KEY", "CALLER_VERIFY_KEY"] as const;
const caller = { clientId: "4b6f1c2e-0000-4000-8000-000000000001", role: "client", via: "jwt" as const };

describe("auth - caller keys from the environment", () => {
  const saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));
  const setEnv = (env: Partial<Record<(typeof VARS)[number], string>>) => {
    for (const v of VARS) {
      if (env[v] === undefined) delete process.env[v];
      else process.env[v] = env[v];
    }
  };
  afterEach(() => setEnv(saved as Record<string, string>));

  const seed = Buffer.alloc(32, 3).toString("base64");
  const pub = rawPublicKeyOf(privateKeyFrom(seed));

  it("auth - production refuses to start a gateway without CALLER_SIGNING_KEY", () => {
    setEnv({ NODE_ENV: "production", CALLER_VERIFY_KEY: pub });
    expect(() => checkCallerKeys({ sign: true, verify: true })).toThrow(/CALLER_SIGNING_KEY is required/);
  });

  it("auth - production refuses to start a service with account actions without a verify key", () => {
    setEnv({ NODE_ENV: "production" });
    expect(() => checkCallerKeys({ sign: false, verify: true })).toThrow(/CALLER_VERIFY_KEY is required/);
    expect(checkCallerKeys({ sign: false, verify: false })).toBeUndefined(); // e.g. a gpu-node: needs none
  });

  it("auth - production with the public key only verifies, and cannot sign", () => {
    setEnv({ NODE_ENV: "production", CALLER_VERIFY_KEY: pub });
    expect(checkCallerKeys({ sign: false, verify: true })).toBeUndefined();
    expect(() => callerSigner().tokenFor(caller)).toThrow(/CALLER_SIGNING_KEY is required/);
    setEnv({ NODE_ENV: "production", CALLER_SIGNING_KEY: seed });
    const token = callerSigner().tokenFor(caller);
    setEnv({ NODE_ENV: "production", CALLER_VERIFY_KEY: pub });
    expect(callerVerifier().check(token)).toEqual({ caller });
  });

  it("auth - outside production the development pair is used, with a warning", () => {
    setEnv({});
    expect(checkCallerKeys({ sign: true, verify: true })).toMatch(/development key pair/);
    expect(callerVerifier().check(callerSigner().tokenFor(caller))).toEqual({ caller });
  });

  it("auth - a verify key that does not match the signing key, or a malformed key, fails the start", () => {
    setEnv({ CALLER_SIGNING_KEY: seed, CALLER_VERIFY_KEY: rawPublicKeyOf(generateKeyPairSync("ed25519").privateKey) });
    expect(() => checkCallerKeys({ sign: true, verify: true })).toThrow(/not the public key/);
    setEnv({ CALLER_VERIFY_KEY: "short" });
    expect(() => checkCallerKeys({ sign: false, verify: true })).toThrow(/32 bytes/);
  });
});

describe("auth - meta for trusted in-process callers", () => {
  it("auth - live meta always carries a token that verifies, and ignores writes", () => {
    const meta = liveCallerMeta(caller);
    expect(callerVerifier().check(meta.callerToken)).toEqual({ caller });
    meta.callerToken = "forged";
    expect(callerVerifier().check(meta.callerToken)).toEqual({ caller });
    expect(JSON.parse(JSON.stringify(meta))).toEqual({ caller, callerToken: expect.any(String) });
  });
});
