/**
 * The revocation rule for restricted tokens, as operators run it: two gateway replicas, auth and
 * usage in separate processes over NATS. Both replicas have answered (and cached) a token; after it
 * is deleted through one of them, every request sent more than 1 s after the deletion answered is
 * refused (401) on both, and the account's other token keeps working on both.
 */
import { freePort, http, HttpResult, routed } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

/** The deletion's answer comes after its commit: from then on a replica may trust an old answer 1 s at most. */
const RULE_MS = 1_000;

let platform: NatsPlatform;
let replicas: string[];

beforeAll(async () => {
  const secondPort = await freePort();
  platform = await startNatsPlatform({
    prefix: "tr",
    env: { JWT_SECRET: "token-revocation-e2e-secret", AUTH_RATE_LIMIT_PER_IP: "10000" },
    processes: [["auth", "usage"], ["api-gateway"], { services: ["api-gateway"], env: { PORT: String(secondPort) } }],
    route: ["GET", "/api/usage"],
    readyTimeoutMs: 60_000,
  });
  replicas = [platform.baseUrl, `http://127.0.0.1:${secondPort}`];
  await platform.waitFor(() => routed(replicas[1], "GET", "/api/usage").catch((): false => false), {
    timeoutMs: 60_000,
    message: "the second gateway to route usage",
  });
}, 120_000);
afterAll(() => platform?.stop());

const usage = (base: string, token: string) => http(base, "GET", "/api/usage", { token });

describe("auth - restricted tokens cached on every gateway replica", () => {
  it("auth - a deleted token is refused on every replica within 1 s; another token of the account keeps working", async () => {
    const [a] = replicas;
    const reg = await http(a, "POST", "/api/auth/register", { body: { email: `tr-${Date.now()}@example.com`, name: "Tr", password: "password-123" } });
    expect(reg.status).toBe(201);
    const jwt = reg.body.accessToken as string;
    const mint = async (name: string) => (await http(a, "POST", "/api/auth/tokens", { token: jwt, body: { name, scopes: ["usage:read"] } })).body;
    const doomed = await mint("doomed");
    const kept = await mint("kept");
    for (const base of replicas) for (let i = 0; i < 3; i++) expect((await usage(base, doomed.token)).status).toBe(200); // answered, and cached

    const deleted = await http(a, "DELETE", `/api/auth/tokens/${doomed.id}`, { token: jwt });
    expect(deleted.status).toBe(200);
    const ruleFrom = Date.now() + RULE_MS;

    const late: Array<{ base: string; status: number }> = [];
    const refused = new Set<string>();
    await platform.waitFor(
      async () => {
        for (const base of replicas) {
          const sentAt = Date.now();
          const res: HttpResult = await usage(base, doomed.token);
          if (res.status === 401) refused.add(base);
          else if (sentAt >= ruleFrom) late.push({ base, status: res.status });
        }
        return refused.size === replicas.length;
      },
      { timeoutMs: 15_000, intervalMs: 20, message: "both replicas to refuse the deleted token" },
    );
    expect(late).toEqual([]);
    for (const base of replicas) {
      expect((await usage(base, doomed.token)).body.error.code).toBe("UNAUTHORIZED");
      expect((await usage(base, kept.token)).status).toBe(200);
    }
  });
});
