import { generateKeyPairSync } from "crypto";
import {
  generateCallerKeyPair,
  CallerTokenSigner,
  CallerTokenVerifier,
  privateKeyFrom,
  publicKeyFrom,
  rawPublicKeyOf,
  signCallerToken,
} from "../../lib/caller-token";
import type { Caller } from "../../lib/identity";

const SEED = Buffer.alloc(32, 7).toString("base64");
const caller: Caller = { clientId: "4b6f1c2e-0000-4000-8000-000000000001", role: "client", via: "jwt" };

describe("auth - caller tokens", () => {
  const key = privateKeyFrom(SEED);
  const publicKey = publicKeyFrom(rawPublicKeyOf(key));

  it("auth - a signed token verifies and gives back exactly the caller", () => {
    const verifier = new CallerTokenVerifier(publicKey, () => 1_000_000);
    const token = new CallerTokenSigner(key, () => 1_000_000).tokenFor(caller);
    expect(verifier.check(token)).toEqual({ caller });
  });

  it("auth - a generated pair is what the variables take", () => {
    const { signingKey, verifyKey } = generateCallerKeyPair();
    const token = new CallerTokenSigner(privateKeyFrom(signingKey)).tokenFor(caller);
    expect(new CallerTokenVerifier(publicKeyFrom(verifyKey)).check(token)).toEqual({ caller });
  });

  it("auth - keys load from base64 (seed / raw public key) and from PEM", () => {
    const pair = generateKeyPairSync("ed25519");
    const fromPem = privateKeyFrom(pair.privateKey.export({ format: "pem", type: "pkcs8" }).toString());
    const pubPem = publicKeyFrom(pair.publicKey.export({ format: "pem", type: "spki" }).toString());
    expect(rawPublicKeyOf(fromPem)).toBe(rawPublicKeyOf(pubPem));
    expect(() => privateKeyFrom(Buffer.alloc(16).toString("base64"))).toThrow(/32 bytes/);
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 });
    expect(() => publicKeyFrom(rsa.publicKey.export({ format: "pem", type: "spki" }).toString())).toThrow(/Ed25519/);
  });

  const forged: Array<[string, () => string, string]> = [
    [
      "a token signed with another key",
      () => signCallerToken(caller, 2_000, privateKeyFrom(Buffer.alloc(32, 9).toString("base64"))),
      "Caller token is invalid",
    ],
    [
      "a changed payload",
      () => {
        const [, sig] = signCallerToken(caller, 2_000, key).split(".");
        const payload = Buffer.from(JSON.stringify({ ...caller, clientId: "4b6f1c2e-0000-4000-8000-000000000002", exp: 2_000 })).toString("base64url");
        return `${payload}.${sig}`;
      },
      "Caller token is invalid",
    ],
    ["an expired token", () => signCallerToken(caller, 999, key), "Caller token expired"],
    ["garbage", () => "not-a-token", "Caller token is invalid"],
    ["a signed non-UUID client id", () => signCallerToken({ ...caller, clientId: "x" }, 2_000, key), "Caller token is invalid"],
    ["an overlong token", () => "a".repeat(5000) + ".b", "Caller token is invalid"],
  ];
  it.each(forged)("auth - %s is refused", (_name, make, error) => {
    const verifier = new CallerTokenVerifier(publicKey, () => 1_000_000); // now = 1000 s
    expect(verifier.check(make())).toEqual({ error });
  });

  it("auth - a cached token is refused once it expires", () => {
    let now = 1_000_000;
    const token = new CallerTokenSigner(key, () => now, 60).tokenFor(caller);
    const verifier = new CallerTokenVerifier(publicKey, () => now);
    expect(verifier.check(token)).toEqual({ caller });
    now += 59_000;
    expect(verifier.check(token)).toEqual({ caller });
    now += 1_000;
    expect(verifier.check(token)).toEqual({ error: "Caller token expired" });
  });

  it("auth - the gateway re-signs a caller's token only after half its lifetime", () => {
    let now = 1_000_000;
    const signer = new CallerTokenSigner(key, () => now, 60);
    const first = signer.tokenFor(caller);
    now += 29_000;
    expect(signer.tokenFor(caller)).toBe(first);
    expect(signer.tokenFor({ ...caller, via: "apiKey" })).not.toBe(first);
    now += 2_000;
    expect(signer.tokenFor(caller)).not.toBe(first);
  });
});
