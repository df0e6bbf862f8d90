/**
 * services/inference/batches/batch-pace.ts against the real Redis: two paces on one key stand for two
 * inference replicas. An interactive request in one holds the other's batch lines to the floor until
 * BATCH_PACE_IDLE_MS after it, a long one (a stream) keeps doing so while it runs, and without Redis
 * (or with Redis unreachable) a replica paces for its own requests only.
 */
import Redis from "ioredis";
import { InteractivePace, RedisPaceSignal } from "../../services/inference/batches/batch-pace";
import { REDIS_URL, uniqueName, waitFor } from "../support/platform";

const SETTINGS = { pacedInFlight: 2, idleMs: 300 };
const FULL = 31;

describe("inference - batch pacing across replicas (Redis)", () => {
  const redis = new Redis(REDIS_URL);
  afterAll(() => redis.quit());

  const replicas = (settings = SETTINGS) => {
    const key = uniqueName("pace-test");
    return [new InteractivePace(settings, new RedisPaceSignal(redis, key)), new InteractivePace(settings, new RedisPaceSignal(redis, key))];
  };

  it("inference - batch pace: one replica's interactive request holds the other's lines to the floor, until it has been idle idleMs", async () => {
    const [a, b] = replicas();
    expect(await b.limit(FULL)).toBe(FULL);
    const end = a.begin();
    expect(await a.limit(FULL)).toBe(SETTINGS.pacedInFlight);
    await waitFor(async () => (await b.limit(FULL)) === SETTINGS.pacedInFlight, { timeoutMs: 2_000, intervalMs: 10, message: "b paced by a's request" });
    end();
    const endedAt = Date.now();
    // Both stay paced for about idleMs after the request ended, then run at full concurrency again.
    await waitFor(async () => (await b.limit(FULL)) === FULL && (await a.limit(FULL)) === FULL, {
      timeoutMs: 3_000,
      intervalMs: 10,
      message: "both back at full concurrency",
    });
    expect(Date.now() - endedAt).toBeGreaterThanOrEqual(SETTINGS.idleMs * 0.75);
  });

  it("inference - batch pace: a request running longer than idleMs keeps the other replica paced while it runs", async () => {
    // A longer window than the other tests': the mark a's looks renew holds idleMs, so a pause of the
    // test process near idleMs (a loaded CI machine) would let it lapse between two looks, which
    // pacing allows (it is best effort) and this test is not about.
    const long = { ...SETTINGS, idleMs: 1500 };
    const [a, b] = replicas(long);
    const end = a.begin();
    const until = Date.now() + long.idleMs * 1.5;
    while (Date.now() < until) {
      // a's runner looks every 50 ms, as its BATCH_POLL_MS would make it
      expect(await a.limit(FULL)).toBe(long.pacedInFlight);
      await new Promise((r) => setTimeout(r, 50));
      expect(await b.limit(FULL)).toBe(long.pacedInFlight);
    }
    end();
    await waitFor(async () => (await b.limit(FULL)) === FULL, { timeoutMs: 6_000, intervalMs: 10, message: "b back at full concurrency" });
  });

  it("inference - batch pace: without a signal, or with Redis unreachable, a replica paces for its own requests only", async () => {
    const errors: Error[] = [];
    const refused = () => Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:1"));
    const lone = new InteractivePace(SETTINGS);
    const cut = new InteractivePace(SETTINGS, { mark: refused, left: refused }, (err) => errors.push(err));
    for (const pace of [lone, cut]) {
      expect(await pace.limit(FULL)).toBe(FULL);
      const end = pace.begin();
      expect(await pace.limit(FULL)).toBe(SETTINGS.pacedInFlight);
      expect(pace.interactive).toBe(1);
      end();
      end(); // once only
      expect(pace.interactive).toBe(0);
      expect(await pace.limit(FULL)).toBe(SETTINGS.pacedInFlight); // within idleMs of its end
      await waitFor(async () => (await pace.limit(FULL)) === FULL, { timeoutMs: 3_000, intervalMs: 10, message: "back at full concurrency" });
    }
    expect(errors).toHaveLength(1); // reported once while it keeps failing
  });
});
