import { readCredentials } from "../../services/api-gateway/credentials";
import { signAccessToken, verifyAccessToken } from "../../lib/jwt";
import { API_KEY_PATTERN, generateApiKey, hashApiKey } from "../../services/auth/api-keys";
import jwt from "jsonwebtoken";

describe("auth - reading credentials", () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ["nothing", {}, "none"],
    ["bearer JWT", { authorization: "Bearer aaa.bbb.ccc" }, "jwt"],
    ["bearer API key", { authorization: "Bearer ci_abc" }, "apiKey"],
    ["lowercase scheme", { authorization: "bearer aaa.bbb.ccc" }, "jwt"],
    ["X-API-Key", { "x-api-key": "ci_abc" }, "apiKey"],
    ["X-API-Key without prefix", { "x-api-key": "abc" }, "malformed"],
    ["Basic scheme", { authorization: "Basic dXNlcjpwYXNz" }, "malformed"],
    ["Bearer without token", { authorization: "Bearer " }, "malformed"],
  ];
  it.each(cases)("%s", (_name, headers, kind) => {
    expect(readCredentials(headers).kind).toBe(kind);
  });
});

describe("auth - API keys", () => {
  it("auth - keys are ci_ + 32 lowercase letters/digits and unique", () => {
    const keys = new Set(Array.from({ length: 200 }, generateApiKey));
    expect(keys.size).toBe(200);
    for (const key of keys) expect(key).toMatch(API_KEY_PATTERN);
  });
  it("auth - only the SHA-256 of a key is stored", () => {
    const key = generateApiKey();
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashApiKey(key)).not.toContain(key.slice(3));
  });
  it("auth - a key's stored form is its SHA-256 in lowercase hex, as keys stored before were", () => {
    // Fixed vectors (sha256sum of the text): a change of hashing would lock every existing key out.
    expect(hashApiKey("ci_" + "a".repeat(32))).toBe("90775680fe9c5e34820caaab1f3a30f4fe1dd24e1359f903122a1b47e2ad7569");
    expect(hashApiKey("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });
});

describe("auth - access tokens", () => {
  const secret = "unit-secret";
  const id = "4b6f1c2e-0000-4000-8000-000000000001";
  it("auth - a signed token verifies, with sub, role, jti and a 24 h lifetime", () => {
    const claims = verifyAccessToken(signAccessToken(id, "client", secret), secret);
    if ("error" in claims) throw new Error(claims.error);
    expect(claims.sub).toBe(id);
    expect(claims.role).toBe("client");
    expect(claims.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect(claims.exp - claims.iat).toBe(24 * 3600);
  });
  it("auth - alg none is refused", () => {
    const none = jwt.sign({ role: "client", sub: "c-1", jti: "x" }, "", { algorithm: "none" });
    expect(verifyAccessToken(none, secret)).toEqual({ error: "Access token is invalid" });
  });
  it("auth - another algorithm with the same secret is refused", () => {
    const hs512 = jwt.sign({ role: "client", jti: "x" }, secret, { algorithm: "HS512", subject: "c-1" });
    expect("error" in verifyAccessToken(hs512, secret)).toBe(true);
  });
  const now = Math.floor(Date.now() / 1000);
  const rules: Array<[string, object, string]> = [
    ["no exp", { iat: now }, "Access token must carry exp and iat"],
    ["no iat", { exp: now + 60, noTimestamp: true }, "Access token must carry exp and iat"],
    ["a 100-year exp", { iat: now, exp: now + 100 * 365 * 86_400 }, "Access token lifetime exceeds 24 hours"],
    ["exp 24 h + 1 s after iat", { iat: now - 10, exp: now - 10 + 86_401 }, "Access token lifetime exceeds 24 hours"],
    ["iat 2 minutes ahead", { iat: now + 120, exp: now + 3600 }, "Access token is issued in the future"],
    ["a non-UUID sub", { iat: now, exp: now + 60, sub: "not-a-uuid" }, "Access token is malformed"],
  ];
  it.each(rules)("auth - %s is refused", (_name, claims, error) => {
    const { noTimestamp, sub, ...rest } = claims as { noTimestamp?: boolean; sub?: string };
    const token = jwt.sign({ role: "client", jti: "j", sub: sub ?? id, ...rest }, secret, { algorithm: "HS256", noTimestamp: noTimestamp ?? false });
    expect(verifyAccessToken(token, secret)).toEqual({ error });
  });
  it("auth - iat within the 60 s clock skew and exactly 24 h of lifetime are accepted", () => {
    const token = jwt.sign({ role: "client", jti: "j", sub: id, iat: now + 30, exp: now + 30 + 86_400 }, secret, { algorithm: "HS256" });
    expect(verifyAccessToken(token, secret)).toMatchObject({ sub: id });
  });
  it("auth - an expired token says so", () => {
    const old = jwt.sign({ role: "client", jti: "x", exp: Math.floor(Date.now() / 1000) - 10 }, secret, { subject: "c-1" });
    expect(verifyAccessToken(old, secret)).toEqual({ error: "Access token expired" });
  });
});
