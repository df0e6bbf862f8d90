/**
 * auth - the cap on concurrent password hashes, through the HTTP gateway at OWASP's cost
 * (scrypt N = 2^17: 128 MiB a hash): a burst of logins gets 503 SERVICE_UNAVAILABLE with
 * Retry-After past the bound, never more hashes at once than AUTH_HASH_CONCURRENCY (counted by the
 * service's gate), and a refused login changes nothing (no failure counted, the account works).
 */
import { http, startTestPlatform, TestPlatform, uniqueName, waitForRoute } from "../support/platform";
import type { HashGate } from "../../services/auth/hash-gate";

const LIMIT = 2;
const QUEUE = 1;
const BURST = 12;

describe("auth - concurrent password hashes are capped", () => {
  let platform: TestPlatform;
  const email = `${uniqueName("cap")}@example.com`;
  const password = "correct horse battery";

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["api-gateway", "auth"],
      env: {
        SCRYPT_LOG_N: "17",
        AUTH_HASH_CONCURRENCY: String(LIMIT),
        AUTH_HASH_QUEUE: String(QUEUE),
        // above the hashes one burst admits (LIMIT + QUEUE): only refused logins counted as failures would reach it
        AUTH_RATE_LIMIT_PER_EMAIL: String(LIMIT + QUEUE + 1),
        AUTH_RATE_LIMIT_PER_IP: "1000",
      },
    });
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/login");
    expect((await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, name: "Cap", password } })).status).toBe(201);
  });
  afterAll(() => platform?.stop());

  const gate = () => (platform.broker.getLocalService("auth") as unknown as { hashGate: HashGate }).hashGate;

  it("auth - a burst of logins: past the bound 503 with Retry-After, never more hashes at once than the cap", async () => {
    const answers = await Promise.all(Array.from({ length: BURST }, () => http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password } })));
    const refused = answers.filter((a) => a.status === 503);
    const admitted = answers.filter((a) => a.status === 200);
    expect(refused.length + admitted.length).toBe(BURST);
    expect(refused.length).toBeGreaterThan(0);
    expect(admitted.length).toBeGreaterThanOrEqual(1);
    for (const a of refused) {
      expect(a.body).toEqual({ error: { code: "SERVICE_UNAVAILABLE", message: expect.any(String), details: { retryAfter: 1 } } });
      expect(a.headers.get("retry-after")).toBe("1");
    }
    for (const a of admitted) expect(a.body.accessToken).toEqual(expect.any(String));
    expect(gate().peak).toBeLessThanOrEqual(LIMIT);
  });

  it("auth - refused logins count as no failure: wrong passwords past the bound, then the owner still logs in", async () => {
    const answers = await Promise.all(
      Array.from({ length: BURST }, () => http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password: "wrong password" } })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 503 || s === 401)).toBe(true);
    expect(gate().peak).toBeLessThanOrEqual(LIMIT);
    const owner = await http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password } });
    expect(owner.status).toBe(200);
  });
});
