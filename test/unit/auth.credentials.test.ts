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
});

describe("auth - access tokens", () => {
  const secret = "unit-secret";
  it("auth - a signed token verifies, with sub, role, jti and a 24 h lifetime", () => {
    const claims = verifyAccessToken(signAccessToken("c-1", "client", secret), secret);
    if ("error" in claims) throw new Error(claims.error);
    expect(claims.sub).toBe("c-1");
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
  it("auth - an expired token says so", () => {
    const old = jwt.sign({ role: "client", jti: "x", exp: Math.floor(Date.now() / 1000) - 10 }, secret, { subject: "c-1" });
    expect(verifyAccessToken(old, secret)).toEqual({ error: "Access token expired" });
  });
});
