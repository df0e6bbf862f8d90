import jwt from "jsonwebtoken";
import { ACCOUNT_CACHE_MS, CallerResolver } from "../../services/api-gateway/caller-resolver";
import { readCredentials } from "../../services/api-gateway/credentials";
import { hashApiKey } from "../../services/auth/api-keys";
import { signAccessToken } from "../../lib/jwt";
import type { Caller } from "../../lib/identity";

const ID = "4b6f1c2e-0000-4000-8000-000000000001";
const KEY = "ci_" + "a".repeat(32);
const SECRET = "auth-caller-resolver-test-secret"; // the gateway's JWT_SECRET here

function resolverWith(now: () => number) {
  const seen = { apiKey: [] as string[], account: [] as string[] };
  const accounts = new Map([[ID, "client"]]);
  const resolver = new CallerResolver<null>(
    {
      apiKey: async (_ctx, hash) => {
        seen.apiKey.push(hash);
        return hash === hashApiKey(KEY) ? ({ clientId: ID, role: "client", via: "apiKey" } as Caller) : null;
      },
      accountRole: async (_ctx, id) => {
        seen.account.push(id);
        return accounts.get(id) ?? null;
      },
    },
    SECRET,
    now,
  );
  return { resolver, seen, accounts };
}

describe("auth - gateway caller resolution", () => {
  const secret = SECRET;

  it("auth - an API key is sent to auth only as its SHA-256", async () => {
    const { resolver, seen } = resolverWith(Date.now);
    expect(await resolver.resolve(readCredentials({ "x-api-key": KEY }), null)).toEqual({ caller: { clientId: ID, role: "client", via: "apiKey" } });
    expect(seen.apiKey).toEqual([hashApiKey(KEY)]);
  });

  it("auth - an overlong or ill-formed key is refused without asking auth", async () => {
    const { resolver, seen } = resolverWith(Date.now);
    for (const key of [KEY + "x".repeat(100), "ci_SHORT", KEY.toUpperCase().replace("CI_", "ci_")])
      expect(await resolver.resolve(readCredentials({ authorization: `Bearer ${key}` }), null)).toEqual({ error: "API key is invalid or was revoked" });
    expect(seen.apiKey).toEqual([]);
  });

  it("auth - a JWT's account is looked up once, then cached for a short while", async () => {
    let now = Date.now();
    const { resolver, seen, accounts } = resolverWith(() => now);
    const token = signAccessToken(ID, "client", secret);
    const creds = readCredentials({ authorization: `Bearer ${token}` });
    for (let i = 0; i < 5; i++) expect(await resolver.resolve(creds, null)).toEqual({ caller: { clientId: ID, role: "client", via: "jwt" } });
    expect(seen.account).toEqual([ID]);
    accounts.delete(ID);
    now += ACCOUNT_CACHE_MS + 1;
    expect(await resolver.resolve(creds, null)).toEqual({ error: "The account of these credentials no longer exists" });
  });

  it("auth - a JWT verified once is remembered until its exp, and refused as expired after it; a tampered copy is not", async () => {
    let now = Date.now();
    const { resolver } = resolverWith(() => now);
    const token = signAccessToken(ID, "client", secret);
    const creds = readCredentials({ authorization: `Bearer ${token}` });
    expect(await resolver.resolve(creds, null)).toEqual({ caller: { clientId: ID, role: "client", via: "jwt" } });
    const [head, body, sig] = token.split(".");
    const tampered = `${head}.${body}.${sig.slice(0, -2)}${sig.endsWith("AA") ? "BB" : "AA"}`;
    expect(await resolver.resolve(readCredentials({ authorization: `Bearer ${tampered}` }), null)).toEqual({ error: "Access token is invalid" });
    now += 24 * 60 * 60 * 1000 + 1;
    expect(await resolver.resolve(creds, null)).toEqual({ error: "Access token expired" });
    expect(await resolver.resolve(creds, null)).toEqual({ error: "Access token expired" });
  });

  it("auth - a JWT's role is the account's, not the token's: a forged or stale admin claim is not admin", async () => {
    let now = Date.now();
    const { resolver, accounts } = resolverWith(() => now);
    const adminClaim = readCredentials({ authorization: `Bearer ${signAccessToken(ID, "admin", secret)}` });
    expect(await resolver.resolve(adminClaim, null)).toEqual({ caller: { clientId: ID, role: "client", via: "jwt" } });
    accounts.set(ID, "admin"); // promoted: seen once the cached answer expires
    now += ACCOUNT_CACHE_MS + 1;
    const clientClaim = readCredentials({ authorization: `Bearer ${signAccessToken(ID, "client", secret)}` });
    expect(await resolver.resolve(clientClaim, null)).toEqual({ caller: { clientId: ID, role: "admin", via: "jwt" } });
  });

  it("auth - a JWT of an account that does not exist is refused", async () => {
    const { resolver } = resolverWith(Date.now);
    const token = signAccessToken("4b6f1c2e-0000-4000-8000-00000000dead", "client", secret);
    expect(await resolver.resolve(readCredentials({ authorization: `Bearer ${token}` }), null)).toEqual({
      error: "The account of these credentials no longer exists",
    });
  });

  it("auth - a refused JWT costs no lookup", async () => {
    const { resolver, seen } = resolverWith(Date.now);
    const noExp = jwt.sign({ role: "client", jti: "j" }, secret, { subject: ID });
    expect(await resolver.resolve(readCredentials({ authorization: `Bearer ${noExp}` }), null)).toEqual({ error: "Access token must carry exp and iat" });
    expect(seen.account).toEqual([]);
  });
});
