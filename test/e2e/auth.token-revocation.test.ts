/**
 * The revocation rule for restricted tokens, as operators run it: two gateway replicas, auth and
 * usage in separate processes over NATS. Both replicas have answered (and cached) a token; after it
 * is deleted through one of them, every request sent more than 1 s after the deletion answered is
 * refused (401) on both, and the account's other token keeps working on both.
 */
import { http } from "../support/platform";
import type { NatsPlatform } from "../support/nats-platform";
import { startTwoGateways, untilRefusedEverywhere } from "../support/gateway-replicas";

let platform: NatsPlatform;
let replicas: string[];

beforeAll(async () => {
  ({ platform, replicas } = await startTwoGateways("tr", ["auth", "usage"], ["GET", "/api/usage"], {
    JWT_SECRET: "token-revocation-e2e-secret",
    AUTH_RATE_LIMIT_PER_IP: "10000",
  }));
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

    expect((await http(a, "DELETE", `/api/auth/tokens/${doomed.id}`, { token: jwt })).status).toBe(200);
    expect(await untilRefusedEverywhere(platform, replicas, (base) => usage(base, doomed.token))).toEqual([]);
    for (const base of replicas) {
      expect((await usage(base, doomed.token)).body.error.code).toBe("UNAUTHORIZED");
      expect((await usage(base, kept.token)).status).toBe(200);
    }
  });
});
