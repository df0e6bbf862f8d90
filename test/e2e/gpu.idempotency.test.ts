/**
 * `Idempotency-Key` on POST /api/gpu/jobs through the HTTP gateway: gateway, auth and
 * gpu-scheduler in one process (no gpu-node: the jobs stay queued, which is all these tests need).
 */
import { Client } from "pg";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SERVICES = ["api-gateway", "auth", "gpu-scheduler"];

async function register(base: string, name: string): Promise<string> {
  const res = await http(base, "POST", "/api/auth/register", {
    body: { email: `${name}-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`, name, password: "correct horse battery" },
  });
  expect(res.status).toBe(201);
  return res.body.accessToken as string;
}

const submit = (base: string, token: string, body: unknown, key?: string) =>
  http(base, "POST", "/api/gpu/jobs", { token, body, headers: key === undefined ? {} : { "Idempotency-Key": key } });
const jobCount = async (base: string, token: string) => (await http(base, "GET", "/api/gpu/jobs", { token })).body.jobs.length as number;

/** Starts a platform (settings `env`) around the enclosing describe; `storedKeys` counts a key's rows in its database. */
function usePlatform(env: Record<string, string> = {}) {
  let platform: TestPlatform | undefined;
  let db: Client | undefined;
  const live = {
    base: "",
    storedKeys: async (key: string) => Number((await db!.query("SELECT count(*) AS n FROM gpu_scheduler.idempotency_keys WHERE key = $1", [key])).rows[0].n),
  };
  beforeAll(async () => {
    platform = await startTestPlatform({ services: SERVICES, env });
    live.base = platform.baseUrl;
    await waitForRoute(live.base, "POST", "/api/gpu/jobs");
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await platform?.stop();
  });
  return live;
}

describe("gpu idempotency - through the gateway", () => {
  const live = usePlatform();
  const { storedKeys } = live;

  test("gpu idempotency - the same key and body again: the first answer (201, body, Location) with Idempotent-Replayed, no second job", async () => {
    const token = await register(live.base, "replay");
    const first = await submit(live.base, token, { command: "echo once", gpuType: "any" }, "order-42");
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ id: expect.stringMatching(UUID), status: "queued", queuePosition: expect.any(Number) });
    expect(first.headers.get("location")).toBe(`/api/gpu/jobs/${first.body.id}`);
    expect(first.headers.get("idempotent-replayed")).toBeNull();

    // The same body with its fields in another order is the same request.
    const again = await submit(live.base, token, { gpuType: "any", command: "echo once" }, "order-42");
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("location")).toBe(first.headers.get("location"));
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await jobCount(live.base, token)).toBe(1);
  });

  test("gpu idempotency - the same key with another body is 422 IDEMPOTENCY_KEY_REUSED and creates nothing", async () => {
    const token = await register(live.base, "reuse");
    const first = await submit(live.base, token, { command: "echo one" }, "k-reuse");
    expect(first.status).toBe(201);
    const other = await submit(live.base, token, { command: "echo two" }, "k-reuse");
    expect(other.status).toBe(422);
    expect(other.body).toEqual({ error: { code: "IDEMPOTENCY_KEY_REUSED", message: expect.stringContaining("Idempotency-Key"), details: null } });
    expect(other.headers.get("idempotent-replayed")).toBeNull();
    expect(await jobCount(live.base, token)).toBe(1);
    // The first request is still answered as before.
    expect((await submit(live.base, token, { command: "echo one" }, "k-reuse")).text).toBe(first.text);
  });

  test("gpu idempotency - one key in two accounts: two independent jobs", async () => {
    const [alice, bob] = await Promise.all([register(live.base, "alice"), register(live.base, "bob")]);
    const a = await submit(live.base, alice, { command: "echo shared" }, "shared-key");
    const b = await submit(live.base, bob, { command: "echo shared" }, "shared-key");
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.body.id).not.toBe(a.body.id);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    // Another body under bob's key is bob's own business: alice's key is untouched.
    expect((await submit(live.base, bob, { command: "echo different" }, "shared-key")).status).toBe(422);
    expect((await submit(live.base, alice, { command: "echo shared" }, "shared-key")).body).toEqual(a.body);
    expect([await jobCount(live.base, alice), await jobCount(live.base, bob)]).toEqual([1, 1]);
  });

  test("gpu idempotency - ten concurrent requests with one key create one job and all get the same body", async () => {
    const token = await register(live.base, "burst");
    const answers = await Promise.all(Array.from({ length: 10 }, () => submit(live.base, token, { command: "echo burst" }, "burst-key")));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(answers.filter((a) => a.headers.get("idempotent-replayed") === "true")).toHaveLength(9);
    expect(await jobCount(live.base, token)).toBe(1);
    expect(await storedKeys("burst-key")).toBe(1);
  });

  test("gpu idempotency - a malformed key is 400 naming the header and stores nothing; 255 visible characters are fine", async () => {
    const token = await register(live.base, "badkey");
    for (const key of ["", "x".repeat(256), "has space", "caf\u00e9"]) {
      const res = await submit(live.base, token, { command: "echo bad key" }, key);
      expect({ key, status: res.status }).toEqual({ key, status: 400 });
      expect(res.body.error).toMatchObject({ code: "VALIDATION_FAILED", details: [{ field: "Idempotency-Key", message: expect.any(String) }] });
      expect(await storedKeys(key)).toBe(0);
    }
    expect(await jobCount(live.base, token)).toBe(0);
    const longest = "~".repeat(255);
    expect((await submit(live.base, token, { command: "echo fine" }, longest)).status).toBe(201);
    expect(await storedKeys(longest)).toBe(1);
  });

  test("gpu idempotency - a request refused for its body stores nothing: the key stays free", async () => {
    const token = await register(live.base, "refused");
    const refused = await submit(live.base, token, { command: "   " }, "k-refused");
    expect(refused.status).toBe(400);
    expect(await storedKeys("k-refused")).toBe(0);
    const accepted = await submit(live.base, token, { command: "echo now valid" }, "k-refused");
    expect(accepted.status).toBe(201);
    expect(accepted.headers.get("idempotent-replayed")).toBeNull();
    expect(await jobCount(live.base, token)).toBe(1);
  });
});

describe("gpu idempotency - expiry (GPU_IDEMPOTENCY_TTL_S)", () => {
  const live = usePlatform({ GPU_IDEMPOTENCY_TTL_S: "1", GPU_SCHEDULE_TICK_MS: "100" });

  test("gpu idempotency - an expired key no longer matches, and housekeeping removes it", async () => {
    const base = live.base;
    const token = await register(base, "expiry");
    const first = await submit(base, token, { command: "echo first" }, "k-expiring");
    expect(first.status).toBe(201);
    const swept = await submit(base, token, { command: "echo swept" }, "k-swept");
    expect(swept.status).toBe(201);

    // Until the key expires another body is 422 (nothing created); then it is a new request.
    const refusals = new Set<string>();
    const later = await waitFor(
      async () => {
        const res = await submit(base, token, { command: "echo second" }, "k-expiring");
        if (res.status !== 201) refusals.add(`${res.status} ${res.body?.error?.code}`);
        return res.status === 201 && res;
      },
      { timeoutMs: 10_000, intervalMs: 100, message: "the key to expire" },
    );
    // (Usually a few 422s first; none at all only if this machine stalled past the TTL.)
    expect([...refusals].filter((r) => r !== "422 IDEMPOTENCY_KEY_REUSED")).toEqual([]);
    expect(later.body.id).not.toBe(first.body.id);
    expect(later.headers.get("idempotent-replayed")).toBeNull();
    expect(await jobCount(base, token)).toBe(3);

    await waitFor(async () => (await live.storedKeys("k-swept")) === 0, {
      timeoutMs: 10_000,
      intervalMs: 100,
      message: "housekeeping to remove the expired key",
    });
  });
});
