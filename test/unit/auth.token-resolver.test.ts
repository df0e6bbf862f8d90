/**
 * Restricted tokens in the gateway's caller resolution, without a broker: the lookup and the clock
 * are fakes. Read from either header, sent to auth as SHA-256 only, trusted at most the cache's
 * second, never past the token's expiry nor after its `token.revoked`, and refused at maxCredits.
 */
import { CallerResolver } from "../../services/api-gateway/caller-resolver";
import { readCredentials } from "../../services/api-gateway/credentials";
import { hashApiKey } from "../../services/auth/api-keys";
import type { ResolvedToken } from "../../services/auth/token-actions";
import { CallerTokenSigner, CallerTokenVerifier, generateCallerKeyPair, privateKeyFrom, publicKeyFrom, signCallerToken } from "../../lib/caller-token";

const ID = "4b6f1c2e-0000-4000-8000-000000000001";
const TOKEN_ID = "4b6f1c2e-0000-4000-8000-000000000002";
const TOKEN = "cit_" + "b".repeat(32);
const T0 = Date.parse("2026-11-27T12:00:00Z");

function resolverWith(answer: Partial<ResolvedToken> = {}) {
  let now = T0;
  const asked: string[] = [];
  const found: ResolvedToken = {
    caller: { clientId: ID, role: "admin", via: "token", token: { id: TOKEN_ID, scopes: ["inference"], models: null, databases: null, jobId: null } },
    expiresAt: new Date(T0 + 60_000).toISOString(),
    maxCredits: null,
    creditsUsed: 0,
    ...answer,
  };
  const resolver = new CallerResolver<null>(
    {
      apiKey: async () => null,
      accountRole: async () => null,
      token: async (_via, hash) => {
        asked.push(hash);
        return hash === hashApiKey(TOKEN) ? found : null;
      },
    },
    "unused-jwt-secret",
    () => now,
    1_000,
  );
  return { resolver, asked, at: (ms: number) => (now = T0 + ms) };
}

const bearer = (token: string) => readCredentials({ authorization: `Bearer ${token}` });

describe("auth - restricted tokens at the gateway", () => {
  it.each([
    ["Authorization: Bearer", { authorization: `Bearer ${TOKEN}` }],
    ["X-API-Key", { "x-api-key": TOKEN }],
  ])("auth - a cit_ token is read from %s", (_name, headers) => {
    expect(readCredentials(headers)).toEqual({ kind: "restrictedToken", token: TOKEN });
  });

  it("auth - the token goes to auth as its SHA-256 only; its caller carries its limits", async () => {
    const { resolver, asked } = resolverWith();
    const resolved = await resolver.resolve(bearer(TOKEN), null);
    expect(resolved).toEqual({ caller: expect.objectContaining({ via: "token", token: expect.objectContaining({ id: TOKEN_ID, scopes: ["inference"] }) }) });
    expect(asked).toEqual([hashApiKey(TOKEN)]);
  });

  it("auth - an ill-formed token is refused without asking auth", async () => {
    const { resolver, asked } = resolverWith();
    for (const token of ["cit_short", TOKEN + "x", TOKEN.toUpperCase().replace("CIT_", "cit_")])
      expect(await resolver.resolve(bearer(token), null)).toEqual({ error: expect.any(String) });
    expect(asked).toEqual([]);
  });

  it("auth - an answer is trusted for less than a second, then asked again", async () => {
    const { resolver, asked, at } = resolverWith();
    await resolver.resolve(bearer(TOKEN), null);
    at(999);
    await resolver.resolve(bearer(TOKEN), null);
    expect(asked).toHaveLength(1);
    at(1_000);
    await resolver.resolve(bearer(TOKEN), null);
    expect(asked).toHaveLength(2);
  });

  it("auth - a cached answer is not trusted past the token's expiry", async () => {
    const { resolver, at } = resolverWith({ expiresAt: new Date(T0 + 500).toISOString() });
    expect(await resolver.resolve(bearer(TOKEN), null)).toHaveProperty("caller");
    at(500);
    expect(await resolver.resolve(bearer(TOKEN), null)).toEqual({ error: expect.any(String) });
  });

  it("auth - token.revoked ends the cached answer at once", async () => {
    const { resolver, asked } = resolverWith();
    await resolver.resolve(bearer(TOKEN), null);
    resolver.tokenRevoked(TOKEN_ID);
    await resolver.resolve(bearer(TOKEN), null);
    expect(asked).toHaveLength(2);
  });

  it("auth - a token at its maxCredits is refused with 403 QUOTA_EXCEEDED (tokenCredits); below it passes", async () => {
    expect(await resolverWith({ maxCredits: 10, creditsUsed: 9.5 }).resolver.resolve(bearer(TOKEN), null)).toHaveProperty("caller");
    const refused = await resolverWith({ maxCredits: 10, creditsUsed: 10 }).resolver.resolve(bearer(TOKEN), null);
    expect(refused).toEqual({
      refusal: expect.objectContaining({ code: 403, type: "QUOTA_EXCEEDED", data: { resource: "tokenCredits", limit: 10, used: 10 } }),
    });
  });
});

describe("auth - a token caller in the signed caller token", () => {
  const { signingKey, verifyKey } = generateCallerKeyPair();
  const key = privateKeyFrom(signingKey);
  const verifier = () => new CallerTokenVerifier(publicKeyFrom(verifyKey));
  const limits = { id: TOKEN_ID, scopes: ["jobs:read" as const], models: ["llama3.2:1b"], databases: [ID], jobId: null };

  it("auth - its limits travel signed and come back as they were", () => {
    const caller = { clientId: ID, role: "client", via: "token" as const, token: limits };
    expect(verifier().check(new CallerTokenSigner(key).tokenFor(caller))).toEqual({ caller });
  });

  it("auth - a token caller without limits (no limits must never read as none) or with a scope that does not exist is refused", () => {
    const exp = Math.floor(Date.now() / 1000) + 60;
    expect(verifier().check(signCallerToken({ clientId: ID, role: "client", via: "token" }, exp, key))).toEqual({ error: expect.any(String) });
    const badScope = { ...limits, scopes: ["root"] } as never;
    expect(verifier().check(signCallerToken({ clientId: ID, role: "client", via: "token", token: badScope }, exp, key))).toEqual({ error: expect.any(String) });
  });
});
