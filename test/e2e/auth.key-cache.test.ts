/**
 * The revocation rule with cached API keys, as operators run it: two gateway replicas and auth in
 * separate processes over NATS. Both replicas have answered (and cached) a key; after the key is
 * replaced through one of them, every request sent more than 1 s after the replacement answered
 * is refused on both, and the new key works on both.
 */
import { http } from "../support/platform";
import type { NatsPlatform } from "../support/nats-platform";
import { startTwoGateways, untilRefusedEverywhere } from "../support/gateway-replicas";

let platform: NatsPlatform;
let replicas: string[];

beforeAll(async () => {
  ({ platform, replicas } = await startTwoGateways("kc", ["auth"], ["GET", "/api/auth/me"], {
    JWT_SECRET: "key-cache-e2e-secret",
    AUTH_RATE_LIMIT_PER_IP: "10000",
  }));
}, 120_000);
afterAll(() => platform?.stop());

const me = (base: string, key: string) => http(base, "GET", "/api/auth/me", { headers: { "x-api-key": key } });

describe("auth - API keys cached on every gateway replica", () => {
  it("auth - a replaced key is refused on every replica within 1 s, and its successor works on every replica", async () => {
    const [a] = replicas;
    const reg = await http(a, "POST", "/api/auth/register", { body: { email: `kc-${Date.now()}@example.com`, name: "Kc", password: "password-123" } });
    expect(reg.status).toBe(201);
    const first = (await http(a, "POST", "/api/auth/api-keys", { token: reg.body.accessToken })).body.apiKey as string;
    for (const base of replicas) for (let i = 0; i < 3; i++) expect((await me(base, first)).status).toBe(200); // answered, and cached

    const replaced = await http(a, "POST", "/api/auth/api-keys", { token: reg.body.accessToken });
    expect(replaced.status).toBe(201);
    expect(await untilRefusedEverywhere(platform, replicas, (base) => me(base, first))).toEqual([]);
    for (const base of replicas) {
      const res = await me(base, first);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("UNAUTHORIZED");
      expect((await me(base, replaced.body.apiKey)).body.id).toBe(reg.body.client.id);
    }
  });
});
