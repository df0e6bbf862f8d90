/**
 * lib/quota-reservations.ts against the real Redis (and the in-process store): admission while
 * settled + held is below the limit, settle and release, the ledger as the settled base (never
 * double-counted), a crashed holder's reservation expiring, and 50 holds racing from two clients.
 */
import Redis from "ioredis";
import { MemoryReservationStore, QuotaReservations, RedisReservationStore, ReservationStore } from "../../lib/quota-reservations";
import type { Standing } from "../../lib/quota-gate";
import { REDIS_URL, uniqueName, waitFor } from "../support/platform";

const CLIENT = "00000000-0000-4000-8000-000000000001";

/** A gate that knows one account: its token limit and the ledger's use. */
const gateOf = (standing: { limit: number | null; used: number }) => ({
  standings: async () =>
    new Map<string, Standing>([
      [
        CLIENT,
        { clientId: CLIENT, limits: {} as Standing["limits"], exceeded: null, quotas: [{ resource: "tokens", period: "month", resetsAt: null, ...standing }] },
      ],
    ]),
});

describe("quota reservations", () => {
  const redis = new Redis(REDIS_URL);
  afterAll(() => redis.quit());

  const stores: [string, () => ReservationStore][] = [
    ["Redis", () => new RedisReservationStore(redis, uniqueName("quota-test"))],
    ["memory", () => new MemoryReservationStore()],
  ];

  it.each(stores)("quota reservations (%s) - admits below the limit, settles the actual, releases a failure", async (_name, make) => {
    const standing = { limit: 1000, used: 0 };
    const quotas = new QuotaReservations(gateOf(standing), make(), 60_000, () => undefined);
    const a = await quotas.hold(CLIENT, "tokens", 600);
    const b = await quotas.hold(CLIENT, "tokens", 600); // 600 held < 1000: admitted, may overshoot by itself
    await expect(quotas.hold(CLIENT, "tokens", 1)).rejects.toMatchObject({ type: "QUOTA_EXCEEDED", data: { resource: "tokens", limit: 1000, used: 0 } });
    a.release();
    b.settle(100);
    await waitFor(async () => (await quotas.hold(CLIENT, "tokens", 800).catch(() => undefined)) !== undefined, { message: "the release seen" });
    // The ledger catching up with the 100 settled does not count them twice (100 + 800 held < 1000: admitted).
    standing.used = 100;
    await expect(quotas.hold(CLIENT, "tokens", 1)).resolves.toBeDefined();
    // The ledger knowing more (another way in) raises the base: 1000 used, refused with nothing held.
    standing.used = 1000;
    await expect(quotas.hold(CLIENT, "tokens", 1)).rejects.toMatchObject({ data: { used: 1000 } });
  });

  it.each(stores)("quota reservations (%s) - a reservation never settled (its replica crashed) expires", async (_name, make) => {
    const quotas = new QuotaReservations(gateOf({ limit: 100, used: 0 }), make(), 200, () => undefined);
    await quotas.hold(CLIENT, "tokens", 500);
    await expect(quotas.hold(CLIENT, "tokens", 1)).rejects.toMatchObject({ type: "QUOTA_EXCEEDED" });
    await waitFor(async () => (await quotas.hold(CLIENT, "tokens", 1).catch(() => undefined)) !== undefined, { timeoutMs: 5000, message: "expired" });
  });

  it("quota reservations (Redis) - 50 holds racing from two connections: admitted only while settled + held < limit", async () => {
    const other = new Redis(REDIS_URL);
    try {
      const prefix = uniqueName("quota-race");
      const replicas = [redis, other].map(
        (r) => new QuotaReservations(gateOf({ limit: 1000, used: 0 }), new RedisReservationStore(r, prefix), 60_000, () => undefined),
      );
      const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => replicas[i % 2].hold(CLIENT, "tokens", 300)));
      // 0, 300, 600, 900 held are below 1000: exactly 4 admitted.
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(4);
    } finally {
      await other.quit();
    }
  });

  it.each(stores)("quota reservations (%s) - holdAll holds every claim or none: a refused one releases the others", async (_name, make) => {
    const limits = (tokens: number, credits: number): Standing => ({
      clientId: CLIENT,
      limits: {} as Standing["limits"],
      exceeded: null,
      quotas: [
        { resource: "tokens", period: "month", resetsAt: null, limit: tokens, used: 0 },
        { resource: "credits", period: "month", resetsAt: null, limit: credits, used: 0 },
      ],
    });
    const quotas = new QuotaReservations({ standings: async () => new Map() }, make(), 60_000, () => undefined);
    await quotas.holdAll(CLIENT, limits(1000, 10), [
      ["tokens", 900],
      ["credits", 9.5],
    ]);
    await quotas.holdAll(CLIENT, limits(1000, 10), [
      ["tokens", 1],
      ["credits", 1],
    ]); // 900 < 1000, 9.5 < 10: both admitted
    // The credits refused now (10.5 held): the 5000 tokens held alongside are released, not left held.
    await expect(
      quotas.holdAll(CLIENT, limits(1e6, 10), [
        ["tokens", 5000],
        ["credits", 1],
      ]),
    ).rejects.toMatchObject({
      type: "QUOTA_EXCEEDED",
      data: { resource: "credits" },
    });
    // 901 tokens held: below a limit of 902 only once the 5000 are gone.
    await waitFor(
      async () =>
        (await quotas
          .holdAll(CLIENT, limits(902, 100), [
            ["tokens", 1],
            ["credits", 0],
          ])
          .catch(() => undefined)) !== undefined,
      {
        message: "the refused claim's tokens released",
      },
    );
  });

  it("quota reservations - no limit or no standing holds nothing; the store failing falls back to the standing", async () => {
    const failing: ReservationStore = { reserve: () => Promise.reject(new Error("down")), settle: () => Promise.reject(new Error("down")) };
    const warned: string[] = [];
    await expect(
      new QuotaReservations(gateOf({ limit: null, used: 5 }), failing, 1000, (m) => warned.push(m)).hold(CLIENT, "tokens", 10),
    ).resolves.toBeDefined();
    await expect(new QuotaReservations({ standings: async () => new Map() }, failing, 1000, () => undefined).hold(CLIENT, "tokens", 10)).resolves.toBeDefined();
    expect(warned).toEqual([]);
    await expect(new QuotaReservations(gateOf({ limit: 10, used: 5 }), failing, 1000, (m) => warned.push(m)).hold(CLIENT, "tokens", 10)).resolves.toBeDefined();
    await expect(new QuotaReservations(gateOf({ limit: 10, used: 10 }), failing, 1000, (m) => warned.push(m)).hold(CLIENT, "tokens", 1)).rejects.toMatchObject({
      type: "QUOTA_EXCEEDED",
    });
    expect(warned).toHaveLength(2);
  });
});
