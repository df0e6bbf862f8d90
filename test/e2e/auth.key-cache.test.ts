/**
 * The revocation rule with cached API keys, as operators run it: two gateway replicas and auth in
 * separate processes over NATS. Both replicas have answered (and cached) a key; after the key is
 * replaced through one of them, every request sent more than 1 s after the replacement answered
 * is refused on both, and the new key works on both.
 */
import { freePort, http, HttpResult, routed } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

/** The replacement's answer comes after its commit: from then on a replica may trust an old answer 1 s at most. */
const RULE_MS = 1_000;

let platform: NatsPlatform;
let replicas: string[];

beforeAll(async () => {
  const secondPort = await freePort();
  platform = await startNatsPlatform({
    prefix: "kc",
    env: { JWT_SECRET: "key-cache-e2e-secret", AUTH_RATE_LIMIT_PER_IP: "10000" },
    processes: [["auth"], ["api-gateway"], { services: ["api-gateway"], env: { PORT: String(secondPort) } }],
    route: ["GET", "/api/auth/me"],
    readyTimeoutMs: 60_000,
  });
  replicas = [platform.baseUrl, `http://127.0.0.1:${secondPort}`];
  await platform.waitFor(() => routed(replicas[1], "GET", "/api/auth/me").catch((): false => false), {
    timeoutMs: 60_000,
    message: "the second gateway to route auth",
  });
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
    const ruleFrom = Date.now() + RULE_MS;

    // Poll both replicas until each refuses the old key; any request sent after the rule's second must be refused.
    const late: Array<{ base: string; status: number }> = [];
    const refused = new Set<string>();
    await platform.waitFor(
      async () => {
        for (const base of replicas) {
          const sentAt = Date.now();
          const res: HttpResult = await me(base, first);
          if (res.status === 401) refused.add(base);
          else if (sentAt >= ruleFrom) late.push({ base, status: res.status });
        }
        return refused.size === replicas.length;
      },
      { timeoutMs: 15_000, intervalMs: 20, message: "both replicas to refuse the replaced key" },
    );
    expect(late).toEqual([]);
    for (const base of replicas) {
      const res = await me(base, first);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("UNAUTHORIZED");
      expect((await me(base, replaced.body.apiKey)).body.id).toBe(reg.body.client.id);
    }
  });
});
